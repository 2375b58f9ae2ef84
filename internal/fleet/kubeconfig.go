package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A member's kubeconfig is untrusted data. The Secret that holds it is written by whoever may
// write Secrets in its namespace (a tenant, a Cluster API provider), yet the client built from
// it runs in cascade's process, with cascade's file system, environment and network. So a
// kubeconfig is read as data only: RESTConfig copies the fields it knows to be data into a
// fresh rest.Config, and refuses every field that would make the process read a file, run a
// command, go through a proxy or trust a server unverified. Nothing it does not copy reaches
// client-go: no clientcmd.ClientConfig is ever built from a member's kubeconfig.

// MaxKubeconfigBytes is the largest kubeconfig RESTConfig and InlineFiles accept (1 MiB, a
// Secret's own limit): a real one is a few KiB, even with its certificates.
const MaxKubeconfigBytes = 1 << 20

// ErrRefused is wrapped by every error of RESTConfig and InlineFiles that refuses the
// kubeconfig: the bytes are at fault, and the same bytes will be refused again.
var ErrRefused = errors.New("kubeconfig refused")

// execExtension is the cluster extension whose value client-go hands to an exec plugin (as
// clientcmd does; client-go does not export the name).
const execExtension = "client.authentication.k8s.io/exec"

// KubeconfigOptions are the operator's opt-ins (flags --fleet-insecure-kubeconfig-exec,
// --fleet-insecure-kubeconfig-tls).
type KubeconfigOptions struct {
	// ExecCommands: exec credential plugins whose `command` is exactly one of these are
	// allowed (empty: exec refused).
	ExecCommands []string
	// InsecureTLS allows insecure-skip-tls-verify and http:// servers.
	InsecureTLS bool
}

// refused is an error that wraps ErrRefused. msg must hold no secret: names and the field
// refused, never a token, key, password or a URL's userinfo.
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// quote is a tenant-chosen name (a context, cluster, user, command or variable) as an error
// shows it: quoted (escaped, one line) and at most 64 bytes of it.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// serverText is a server URL as an error shows it: without userinfo, query or fragment, and
// bounded.
func serverText(server string) string {
	return SafeText(RedactURL(server), 128)
}

// RESTConfig builds a member's client configuration from its kubeconfig's current context by
// an allowlist.
//
// Copied: the cluster's server (https://, or http:// with o.InsecureTLS; no userinfo, query
// or fragment), certificate-authority-data, tls-server-name and disable-compression; the
// user's token, client-certificate-data, client-key-data and impersonation (as, as-uid,
// as-groups, as-user-extra); exec only when its command is one of o.ExecCommands, and
// insecure-skip-tls-verify only with o.InsecureTLS. Refused: every file path
// (certificate-authority, client-certificate, client-key, tokenFile), auth-provider,
// username/password, proxy-url, and what the options do not allow. Ignored, as inert data:
// the context's namespace, preferences, extensions (but the exec one, passed to an allowed
// exec plugin) and every context, cluster and user the current context does not name.
// Timeouts, QPS and the user agent are left to the caller.
//
// Every error wraps ErrRefused and names the field; none holds a token, key, password or the
// server's userinfo.
func RESTConfig(kubeconfig []byte, o KubeconfigOptions) (*rest.Config, error) {
	if len(kubeconfig) > MaxKubeconfigBytes {
		return nil, refused("%d bytes, more than the %d (1 MiB) accepted", len(kubeconfig), MaxKubeconfigBytes)
	}
	// clientcmd.Load only decodes: it resolves no path and reads no file (that is
	// clientcmd.ResolveLocalPaths and the ClientConfig, neither of which runs here).
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		// A decoding error names a line or a type, but bound and escape it all the same.
		return nil, refused("cannot be parsed: %s", SafeText(err.Error(), MaxErrorText))
	}
	if kc.CurrentContext == "" {
		return nil, refused("no current-context")
	}
	kctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kctx == nil {
		return nil, refused("current-context %s: no such context", quote(kc.CurrentContext))
	}
	if kctx.Cluster == "" {
		return nil, refused("context %s: names no cluster", quote(kc.CurrentContext))
	}
	cluster, ok := kc.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, refused("context %s: cluster %s: no such cluster", quote(kc.CurrentContext), quote(kctx.Cluster))
	}
	// A context without a user is anonymous, as in kubectl; a user named but missing is a
	// mistake, refused rather than read as anonymous.
	user := &clientcmdapi.AuthInfo{}
	if kctx.AuthInfo != "" {
		user, ok = kc.AuthInfos[kctx.AuthInfo]
		if !ok || user == nil {
			return nil, refused("context %s: user %s: no such user", quote(kc.CurrentContext), quote(kctx.AuthInfo))
		}
	}

	cfg := &rest.Config{}
	secure, err := clusterConfig(cfg, "cluster "+quote(kctx.Cluster), cluster, o)
	if err != nil {
		return nil, err
	}
	if err := userConfig(cfg, "user "+quote(kctx.AuthInfo), user, cluster, secure, o); err != nil {
		return nil, err
	}
	return cfg, nil
}

// clusterConfig copies cluster's allowed fields into cfg and reports whether its server is
// https.
func clusterConfig(cfg *rest.Config, where string, c *clientcmdapi.Cluster, o KubeconfigOptions) (bool, error) {
	if c.Server == "" {
		return false, refused("%s: no server", where)
	}
	// Never the parse error or the value in a message: either may hold the userinfo.
	u, err := url.Parse(c.Server)
	if err != nil {
		return false, refused("%s: server is not a URL", where)
	}
	if u.User != nil {
		return false, refused("%s: server has credentials in its URL (userinfo); only token or certificate data in the user is accepted", where)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !o.InsecureTLS {
			return false, refused("%s: server %s is http://, its requests would go unencrypted (allowed only with --fleet-insecure-kubeconfig-tls)", where, serverText(c.Server))
		}
	default:
		return false, refused("%s: server %s: scheme %s: only https:// is accepted", where, serverText(c.Server), quote(u.Scheme))
	}
	if u.Host == "" {
		return false, refused("%s: server %s has no host", where, serverText(c.Server))
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return false, refused("%s: server %s has a query or fragment; only scheme, host and path are accepted", where, serverText(c.Server))
	}
	if c.ProxyURL != "" {
		return false, refused("%s: proxy-url would send the member's requests through another server; it is not accepted", where)
	}
	if c.CertificateAuthority != "" {
		return false, refused("%s: certificate-authority is a file path; only certificate-authority-data is accepted", where)
	}
	if c.InsecureSkipTLSVerify && !o.InsecureTLS {
		return false, refused("%s: insecure-skip-tls-verify would trust any server certificate (allowed only with --fleet-insecure-kubeconfig-tls)", where)
	}
	cfg.Host = c.Server
	cfg.CAData = bytes.Clone(c.CertificateAuthorityData)
	cfg.ServerName = c.TLSServerName
	cfg.Insecure = c.InsecureSkipTLSVerify
	// Whether responses come compressed: inert.
	cfg.DisableCompression = c.DisableCompression
	return u.Scheme == "https", nil
}

// userConfig copies user's allowed fields into cfg. cluster is the context's (its exec
// extension goes to an allowed exec plugin); secure is whether the server is https.
func userConfig(cfg *rest.Config, where string, a *clientcmdapi.AuthInfo, cluster *clientcmdapi.Cluster, secure bool, o KubeconfigOptions) error {
	switch {
	case a.TokenFile != "":
		return refused("%s: tokenFile is a file path; only token data is accepted", where)
	case a.ClientCertificate != "":
		return refused("%s: client-certificate is a file path; only client-certificate-data is accepted", where)
	case a.ClientKey != "":
		return refused("%s: client-key is a file path; only client-key-data is accepted", where)
	case a.Username != "" || a.Password != "":
		return refused("%s: username/password (basic auth) is not accepted; use a token or a client certificate", where)
	case a.AuthProvider != nil:
		return refused("%s: auth-provider %s would run an auth provider plugin in cascade's process; it is not accepted", where, quote(a.AuthProvider.Name))
	}
	// client-go's own clientcmd sends no credentials to an http:// server; neither does
	// cascade, but it says so rather than connect anonymously.
	if !secure && (a.Token != "" || len(a.ClientCertificateData) > 0 || len(a.ClientKeyData) > 0 || a.Exec != nil) {
		return refused("%s: credentials for an http:// server would be sent unencrypted; they are not accepted", where)
	}
	cfg.BearerToken = a.Token
	cfg.CertData = bytes.Clone(a.ClientCertificateData)
	cfg.KeyData = bytes.Clone(a.ClientKeyData)
	// Impersonation is kept (Flux's sanitizer drops it). It is only headers on the requests
	// to the member's own API server, which honours them only if the credential above may
	// impersonate there (RBAC's impersonate verb, in the member): it reaches nothing the
	// credential's owner could not already grant, nothing outside that member, and nothing in
	// cascade's process (no file, command or connection elsewhere). Dropping it would instead
	// run cascade as the credential itself, with other rights than the kubeconfig asked for.
	if a.Impersonate != "" || a.ImpersonateUID != "" || len(a.ImpersonateGroups) > 0 || len(a.ImpersonateUserExtra) > 0 {
		extra := make(map[string][]string, len(a.ImpersonateUserExtra))
		for k, v := range a.ImpersonateUserExtra {
			extra[k] = slices.Clone(v)
		}
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: a.Impersonate,
			UID:      a.ImpersonateUID,
			Groups:   slices.Clone(a.ImpersonateGroups),
			Extra:    extra,
		}
	}
	if a.Exec != nil {
		e, err := execConfig(where, a.Exec, cluster, o)
		if err != nil {
			return err
		}
		cfg.ExecProvider = e
	}
	return nil
}

// execConfig is the exec plugin configuration client-go gets for e, when the operator allowed
// its command.
//
// An allowed plugin still runs with arguments and environment variables the kubeconfig's
// writer chose: allowing a command trusts it to take those safely. What cascade adds: the
// dynamic loader's variables (LD_*, DYLD_*: load any library into the plugin) are refused;
// the plugin never reads standard input; the install hint (tenant text client-go prints to
// cascade's standard error) is dropped; and client-go's own credential plugin policy
// (ExecConfig.PluginPolicy, an Allowlist of the same commands) checks the command again where
// it runs it.
func execConfig(where string, e *clientcmdapi.ExecConfig, cluster *clientcmdapi.Cluster, o KubeconfigOptions) (*clientcmdapi.ExecConfig, error) {
	var allow []clientcmdapi.AllowlistEntry
	for _, c := range o.ExecCommands {
		if c != "" {
			allow = append(allow, clientcmdapi.AllowlistEntry{Command: c})
		}
	}
	if len(allow) == 0 {
		return nil, refused("%s: exec would run the command %s on cascade's host (allowed only with --fleet-insecure-kubeconfig-exec)", where, quote(e.Command))
	}
	if e.Command == "" || !slices.Contains(o.ExecCommands, e.Command) {
		return nil, refused("%s: exec would run the command %s on cascade's host; it is not one of --fleet-insecure-kubeconfig-exec", where, quote(e.Command))
	}
	env := make([]clientcmdapi.ExecEnvVar, 0, len(e.Env))
	for _, v := range e.Env {
		if strings.HasPrefix(v.Name, "LD_") || strings.HasPrefix(v.Name, "DYLD_") {
			return nil, refused("%s: exec env %s would make the dynamic loader load other code into the plugin; it is not accepted", where, quote(v.Name))
		}
		env = append(env, v)
	}
	out := &clientcmdapi.ExecConfig{
		Command:            e.Command,
		Args:               slices.Clone(e.Args),
		Env:                env,
		APIVersion:         e.APIVersion,
		ProvideClusterInfo: e.ProvideClusterInfo,
		InteractiveMode:    clientcmdapi.NeverExecInteractiveMode,
		StdinUnavailable:   true,
		PluginPolicy: clientcmdapi.PluginPolicy{
			PolicyType: clientcmdapi.PluginPolicyAllowlist,
			Allowlist:  allow,
		},
	}
	if x := cluster.Extensions[execExtension]; x != nil {
		out.Config = x.DeepCopyObject()
	}
	return out, nil
}

// InlineFiles (directory provider only): returns the kubeconfig with every file path
// (certificate-authority, client-certificate, client-key, tokenFile) replaced by the file's
// contents as data (certificate-authority-data, client-certificate-data, client-key-data,
// token), relative paths taken relative to dir; a path outside dir (lexically after
// filepath.Clean, AND after filepath.EvalSymlinks of both the path and dir, so a mounted
// Secret's ..data symlinks inside dir work but a symlink to /var/run/secrets/... is refused)
// is an error naming the field. Output is serialized kubeconfig bytes (clientcmd.Write) so the
// provider hashes contents (a rotated file changes the member).
//
// Every cluster and user is inlined, not only the current context's: the result is the
// directory's kubeconfig as RESTConfig will read it. A token file's content is trimmed of
// surrounding white space (as client-go's token file source does); a path given beside its
// data (certificate-authority and certificate-authority-data) is an error, as kubectl's
// validation has it; a file over MaxKubeconfigBytes is an error. Files are read through an
// os.Root of dir's real path, so a symlink changed between the check and the read cannot lead
// out of it either. The refusals (a path outside dir, a path beside its data, a file too large,
// an empty token file, a kubeconfig too large or unparsable) wrap ErrRefused; a file that cannot
// be read is its own error (os.ErrNotExist, ...), which may pass once the file is there.
func InlineFiles(kubeconfig []byte, dir string) ([]byte, error) {
	if len(kubeconfig) > MaxKubeconfigBytes {
		return nil, refused("%d bytes, more than the %d (1 MiB) accepted", len(kubeconfig), MaxKubeconfigBytes)
	}
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, refused("cannot be parsed: %s", SafeText(err.Error(), MaxErrorText))
	}
	in, err := newInliner(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = in.root.Close() }()

	for _, name := range slices.Sorted(maps.Keys(kc.Clusters)) {
		c := kc.Clusters[name]
		if c == nil || c.CertificateAuthority == "" {
			continue
		}
		where := "cluster " + quote(name)
		if len(c.CertificateAuthorityData) > 0 {
			return nil, refused("%s: both certificate-authority and certificate-authority-data", where)
		}
		if c.CertificateAuthorityData, err = in.read(where, "certificate-authority", c.CertificateAuthority); err != nil {
			return nil, err
		}
		c.CertificateAuthority = ""
	}
	for _, name := range slices.Sorted(maps.Keys(kc.AuthInfos)) {
		a := kc.AuthInfos[name]
		if a == nil {
			continue
		}
		where := "user " + quote(name)
		if a.ClientCertificate != "" {
			if len(a.ClientCertificateData) > 0 {
				return nil, refused("%s: both client-certificate and client-certificate-data", where)
			}
			if a.ClientCertificateData, err = in.read(where, "client-certificate", a.ClientCertificate); err != nil {
				return nil, err
			}
			a.ClientCertificate = ""
		}
		if a.ClientKey != "" {
			if len(a.ClientKeyData) > 0 {
				return nil, refused("%s: both client-key and client-key-data", where)
			}
			if a.ClientKeyData, err = in.read(where, "client-key", a.ClientKey); err != nil {
				return nil, err
			}
			a.ClientKey = ""
		}
		if a.TokenFile != "" {
			if a.Token != "" {
				return nil, refused("%s: both tokenFile and token", where)
			}
			b, err := in.read(where, "tokenFile", a.TokenFile)
			if err != nil {
				return nil, err
			}
			a.Token = strings.TrimSpace(string(b))
			if a.Token == "" {
				return nil, refused("%s: tokenFile %s is empty", where, quote(a.TokenFile))
			}
			a.TokenFile = ""
		}
	}
	return clientcmd.Write(*kc)
}

// inliner reads the files a kubeconfig of dir names, only from inside dir.
type inliner struct {
	dir      string   // dir, absolute and clean
	resolved string   // dir with its symlinks resolved
	root     *os.Root // resolved, opened
}

func newInliner(dir string) (*inliner, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig directory %s: %w", dir, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig directory %s: %w", dir, err)
	}
	return &inliner{dir: abs, resolved: resolved, root: root}, nil
}

// read is the content of the file field names (path, relative to the directory unless
// absolute), refused if it is outside the directory, before or after symlinks.
func (in *inliner) read(where, field, path string) ([]byte, error) {
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(in.dir, p)
	}
	p = filepath.Clean(p)
	if !within(in.dir, p) {
		return nil, refused("%s: %s %s is outside the directory %s", where, field, quote(path), in.dir)
	}
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", where, field, quote(path), err)
	}
	if !within(in.resolved, resolved) {
		return nil, refused("%s: %s %s is a link to %s, outside the directory %s", where, field, quote(path), quote(resolved), in.dir)
	}
	rel, err := filepath.Rel(in.resolved, resolved)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", where, field, quote(path), err)
	}
	f, err := in.root.Open(rel)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", where, field, quote(path), err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, MaxKubeconfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", where, field, quote(path), err)
	}
	if len(b) > MaxKubeconfigBytes {
		return nil, refused("%s: %s %s is more than %d bytes", where, field, quote(path), MaxKubeconfigBytes)
	}
	return b, nil
}

// within reports whether path is dir or under it; both are clean and absolute.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}
