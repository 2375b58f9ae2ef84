mkdir -p plugins
cp "$(command -v cascade)" plugins/kubectl-cascade   # or kubectl-cascade from a release's archive
PATH=$PWD/plugins:$PATH                              # any directory on your PATH will do
kubectl plugin list
kubectl cascade status
