// Command krew-manifest writes the krew plugin manifest of a release (`make release`:
// cascade.yaml, docs/release.md): the plugin cascade, kubectl's `kubectl cascade`, with one
// platform per archive kubectl-cascade-VERSION-OS-ARCH.tar.gz given, its URI under -url and its
// sha256. Each archive must hold kubectl-cascade and LICENSE as regular files (krew extracts
// nothing else), so that the manifest never names a file its archive lacks.
//
//	go run ./tools/krew-manifest -version vX.Y.Z -url https://.../releases/download/vX.Y.Z -o cascade.yaml ARCHIVE...
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// The plugin: krew's index format, apiVersion krew.googlecontainertools.github.com/v1alpha2.
const (
	apiVersion = "krew.googlecontainertools.github.com/v1alpha2"
	pluginName = "cascade"
	bin        = "kubectl-cascade"
	homepage   = "https://github.com/cascade-gc/cascade"
	// shortDescription is what `kubectl krew search` lists.
	shortDescription = "Explain, check and remove the cascade garbage collector"
	description      = "cascade is an out-of-tree garbage collector for Kubernetes. With your kubeconfig, the\n" +
		"plugin asks a running cascade what it knows about one object and what it would do\n" +
		"(explain), prints its leader, mode, policy in force, sync state and feature levels\n" +
		"(status), checks a policy document and shows the admission objects it makes (policy\n" +
		"validate, policy render), and removes what cascade wrote into the cluster (uninstall).\n"
	caveats = "explain needs get on explanations.debug.cascade.dev (the ClusterRole cascade-debug-reader)\n" +
		"and, without cascade's opt-in aggregated API, the Role cascade-explain-port-forward in\n" +
		"cascade's namespace; status needs get on cascade's Lease (the same Role). See\n" +
		homepage + "/blob/main/docs/cli.md\n"
)

// versionRE is a release version (the Makefile's RELEASE_VERSION_RE): krew wants semver with a v.
var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// Plugin is a krew plugin manifest, the fields cascade's uses.
type Plugin struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

type Metadata struct {
	Name string `json:"name"`
}

type Spec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description"`
	Caveats          string     `json:"caveats"`
	Platforms        []Platform `json:"platforms"`
}

type Platform struct {
	Selector Selector `json:"selector"`
	URI      string   `json:"uri"`
	Sha256   string   `json:"sha256"`
	Files    []File   `json:"files"`
	Bin      string   `json:"bin"`
}

type Selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type File struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// archiveFiles are what each archive holds and krew installs.
var archiveFiles = []string{bin, "LICENSE"}

func main() {
	version := flag.String("version", "", "The release's version, vX.Y.Z.")
	baseURL := flag.String("url", "", "Where the release's archives are downloaded from: ARCHIVE's URI is this, /, its file name.")
	out := flag.String("o", "", "The manifest to write (default: stdout).")
	flag.Parse()
	b, err := manifest(*version, *baseURL, flag.Args())
	if err == nil {
		if *out == "" {
			_, err = os.Stdout.Write(b)
		} else {
			err = os.WriteFile(*out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "krew-manifest: %v\n", err)
		os.Exit(1)
	}
}

// manifest is the plugin manifest of version for archives, downloaded under baseURL.
func manifest(version, baseURL string, archives []string) ([]byte, error) {
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("-version %q is not vX.Y.Z", version)
	}
	if !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("-url %q is not an https URL", baseURL)
	}
	if len(archives) == 0 {
		return nil, errors.New("no archive given")
	}
	p := Plugin{APIVersion: apiVersion, Kind: "Plugin", Metadata: Metadata{Name: pluginName}, Spec: Spec{
		Version: version, Homepage: homepage, ShortDescription: shortDescription, Description: description, Caveats: caveats,
	}}
	prefix := bin + "-" + version + "-"
	for _, a := range archives {
		name := filepath.Base(a)
		platform, ok := strings.CutSuffix(strings.TrimPrefix(name, prefix), ".tar.gz")
		goos, goarch, found := strings.Cut(platform, "-")
		if !strings.HasPrefix(name, prefix) || !ok || !found || goos == "" || goarch == "" || strings.Contains(goarch, "-") {
			return nil, fmt.Errorf("%s is not %sOS-ARCH.tar.gz", name, prefix)
		}
		sum, err := checkArchive(a)
		if err != nil {
			return nil, err
		}
		pl := Platform{
			Selector: Selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      strings.TrimRight(baseURL, "/") + "/" + name,
			Sha256:   sum,
			Bin:      bin,
		}
		for _, f := range archiveFiles {
			pl.Files = append(pl.Files, File{From: f, To: "."})
		}
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	slices.SortFunc(p.Spec.Platforms, func(a, b Platform) int { return strings.Compare(a.URI, b.URI) })
	for i := 1; i < len(p.Spec.Platforms); i++ {
		if p.Spec.Platforms[i].URI == p.Spec.Platforms[i-1].URI {
			return nil, fmt.Errorf("%s given twice", p.Spec.Platforms[i].URI)
		}
	}
	y, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	return append([]byte("# The krew plugin manifest of cascade "+version+" (make release): kubectl krew install --manifest=cascade.yaml\n"), y...), nil
}

// checkArchive returns the sha256 of the gzipped tar at path, once it has found archiveFiles
// in it, each a regular file (the binary executable).
func checkArchive(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	found := map[string]bool{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", path, err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if !slices.Contains(archiveFiles, name) {
			continue
		}
		if hdr.Typeflag != tar.TypeReg || (name == bin && hdr.Mode&0o111 == 0) {
			return "", fmt.Errorf("%s: %s is not a regular file (or not executable): krew extracts regular files and directories only", path, name)
		}
		found[name] = true
	}
	for _, name := range archiveFiles {
		if !found[name] {
			return "", fmt.Errorf("%s holds no %s", path, name)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
