//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/cascade-gc/cascade/e2e/harness"
)

// releaseVersion is the version TestRelease releases: a pre-release of v0.0.0, which no real
// release will be.
const releaseVersion = "v0.0.0-test"

// The OCI media types the archive holds (image-spec v1).
const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociLayerGzip    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform,omitempty"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string          `json:"mediaType"`
	Config    ociDescriptor   `json:"config"`
	Layers    []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// releasePlatforms are the CLI platforms TestRelease has `make release` build: what the test
// must prove is the release's recipe on each kind of artifact, so by default the host's CLI
// (the one it runs) and linux on amd64 and arm64 (the multi-arch image's binaries, one of them
// cross-compiled); every platform of the release (RELEASE_PLATFORMS in the Makefile, darwin
// too) with all set (CASCADE_RELEASE_ALL_PLATFORMS=1). Each platform left out is a cold
// compile of every dependency that CI no longer pays (docs/development.md).
func releasePlatforms(all bool, goos, goarch string) [][2]string {
	out := [][2]string{{"linux", "amd64"}, {"linux", "arm64"}}
	if all {
		return append(out, [2]string{"darwin", "amd64"}, [2]string{"darwin", "arm64"})
	}
	if host := [2]string{goos, goarch}; !slices.Contains(out, host) {
		out = append(out, host)
	}
	return out
}

// TestRelease runs `make release` for a test version into a directory of its own and checks
// every artifact: the exact set; SHA256SUMS against each file; each CLI binary's header (ELF for
// linux, Mach-O for darwin, of its architecture), static, built with -trimpath for its platform
// without cgo (its build information), the version and commit stamped in, the host's own
// printing them with --version; each SBOM (CycloneDX JSON naming the binary's module at the
// version, and k8s.io/client-go at go.mod's version); the image archive (an OCI layout whose
// index.json names one multi-arch index, IMAGE:VERSION, of exactly two manifests, linux/amd64
// and linux/arm64, each blob matching its digest, each config naming its architecture, and each
// image's one layer holding the released linux binary of that architecture, byte for byte);
// install.yaml (the Deployment's image pinned by that index's digest, accepted by the API server
// in a server-side dry run); the chart (its Chart.yaml at the version, rendering the image at
// the version); policy.schema.json (docs/policy.schema.json, byte for byte); each kubectl
// plugin archive (kubectl-cascade, the platform's binary byte for byte, and LICENSE, regular
// files alone; the host's, extracted, is `kubectl cascade`); the krew manifest cascade.yaml (one
// platform per archive, its URI under RELEASE_URL and the archive's sha256, kubectl-cascade its
// binary, what krew's validation asks).
func TestRelease(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	requirePodman(t, root)
	dir := filepath.Join(t.TempDir(), "release")
	platforms := releasePlatforms(os.Getenv("CASCADE_RELEASE_ALL_PLATFORMS") == "1", runtime.GOOS, runtime.GOARCH)
	var list []string
	for _, p := range platforms {
		list = append(list, p[0]+"/"+p[1])
	}
	start := time.Now()
	out, err := runMake(root, "release", "VERSION="+releaseVersion, "RELEASE_DIR="+dir, "RELEASE_PLATFORMS="+strings.Join(list, " "))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("make release VERSION=%s RELEASE_PLATFORMS=%q: %s\n%s", releaseVersion, strings.Join(list, " "), time.Since(start).Round(100*time.Millisecond), lastLines(out, 16))

	name := "cascade-" + releaseVersion
	chart := "cascade-" + strings.TrimPrefix(releaseVersion, "v") + ".tgz"
	want := []string{name + "-image.oci.tar", chart, "install.yaml", "policy.schema.json", "SHA256SUMS", "cascade.yaml"}
	for _, p := range platforms {
		want = append(want, name+"-"+p[0]+"-"+p[1], name+"-"+p[0]+"-"+p[1]+".cdx.json", pluginArchive(name, p))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds\n  %v\nwant\n  %v", dir, got, want)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			t.Logf("  %10d  %s", info.Size(), e.Name())
		}
	}

	checkSums(t, dir, want)

	commit := strings.TrimSpace(gitOutput(t, root, "rev-parse", "HEAD"))
	module := makefileMatch(t, filepath.Join(root, "go.mod"), `(?m)^module (\S+)$`)
	for _, p := range platforms {
		checkReleaseBinary(t, filepath.Join(dir, name+"-"+p[0]+"-"+p[1]), p[0], p[1], module, commit)
	}
	for _, p := range platforms {
		checkPluginArchive(t, root, dir, name, p)
	}
	releaseURL := strings.ReplaceAll(makefileMatch(t, filepath.Join(root, "Makefile"), `(?m)^RELEASE_URL \?= (\S+)$`), "$(VERSION)", releaseVersion)
	checkKrewManifest(t, dir, name, releaseURL, platforms)
	clientGo := strings.TrimSpace(goOutput(t, root, "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go"))
	for _, p := range platforms {
		checkSBOM(t, filepath.Join(dir, name+"-"+p[0]+"-"+p[1]+".cdx.json"), module, clientGo)
	}

	image := makefileMatch(t, filepath.Join(root, "Makefile"), `(?m)^IMAGE \?= (\S+)$`)
	index := checkImageArchive(t, filepath.Join(dir, name+"-image.oci.tar"), dir, name, image, commit)
	checkInstallYAML(t, filepath.Join(dir, "install.yaml"), image+"@"+index)
	checkChart(t, filepath.Join(dir, chart), image)
	checkSameFile(t, filepath.Join(dir, "policy.schema.json"), filepath.Join(root, "docs", "policy.schema.json"))
}

// checkSameFile: the released file is the repository's, byte for byte.
func checkSameFile(t *testing.T, released, source string) {
	t.Helper()
	got, err := os.ReadFile(released)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s", released, source)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func gitOutput(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func goOutput(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// makefileMatch returns the first submatch of re in the file at path.
func makefileMatch(t *testing.T, path, re string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(re).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no line matching %s", path, re)
	}
	return string(m[1])
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// checkSums: SHA256SUMS lists every other artifact once, in sha256sum's format, with its hash.
func checkSums(t *testing.T, dir string, artifacts []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	listed := map[string]string{}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("SHA256SUMS: line %q is not HASH  NAME", sc.Text())
		}
		if _, dup := listed[m[2]]; dup {
			t.Errorf("SHA256SUMS lists %s twice", m[2])
		}
		listed[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, a := range artifacts {
		if a == "SHA256SUMS" {
			continue
		}
		sum, ok := listed[a]
		if !ok {
			t.Errorf("SHA256SUMS does not list %s", a)
			continue
		}
		delete(listed, a)
		if got := sha256File(t, filepath.Join(dir, a)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", a, got, sum)
		}
	}
	for n := range listed {
		t.Errorf("SHA256SUMS lists %s, which is not an artifact", n)
	}
}

// checkReleaseBinary: the binary's header is goos's for goarch; it is static; its build
// information says goos, goarch, no cgo, -trimpath, the module, and the version and commit
// stamped; the one the host can run prints them.
func checkReleaseBinary(t *testing.T, path, goos, goarch, module, commit string) {
	t.Helper()
	base := filepath.Base(path)
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: not ELF: %v", base, err)
		}
		defer func() { _ = f.Close() }()
		machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if f.Class != elf.ELFCLASS64 || f.Machine != machine || f.Type != elf.ET_EXEC {
			t.Errorf("%s: ELF %v %v %v, want ELFCLASS64 %v ET_EXEC", base, f.Class, f.Machine, f.Type, machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: has a %v program header: not static", base, p.Type)
			}
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s: not Mach-O: %v", base, err)
		}
		defer func() { _ = f.Close() }()
		cpu := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if f.Cpu != cpu || f.Type != macho.TypeExec {
			t.Errorf("%s: Mach-O %v %v, want %v executable", base, f.Cpu, f.Type, cpu)
		}
	default:
		t.Fatalf("no header check for %s", goos)
	}

	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("%s: build setting %s=%q, want %q", base, k, settings[k], v)
		}
	}
	// With -trimpath, Go does not record -ldflags in the build information: the values the
	// Makefile's -X flags stamp are looked for in the binary's data instead (and the host's own
	// binary prints them below).
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{releaseVersion, commit} {
		if !bytes.Contains(b, []byte(x)) {
			t.Errorf("%s: %q is not stamped in (-X main.version, main.commit)", base, x)
		}
	}
	if bi.Path != module+"/cmd/cascade" {
		t.Errorf("%s: main package %q, want %s/cmd/cascade", base, bi.Path, module)
	}

	if goos == runtime.GOOS && goarch == runtime.GOARCH {
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", base, err, out)
		}
		if want := fmt.Sprintf("cascade %s (commit %s, ", releaseVersion, commit); !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version printed %q, want it to start %q", base, out, want)
		}
	}
}

// checkSBOM: the file is a CycloneDX JSON document for the module at the version, listing
// k8s.io/client-go at the version go.mod requires, with a package URL.
func checkSBOM(t *testing.T, path, module, clientGo string) {
	t.Helper()
	type component struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Version string `json:"version"`
		PURL    string `json:"purl"`
	}
	var bom struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component component `json:"component"`
		} `json:"metadata"`
		Components []component `json:"components"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Base(path)
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&bom); err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion == "" {
		t.Errorf("%s: bomFormat %q specVersion %q, want CycloneDX", base, bom.BOMFormat, bom.SpecVersion)
	}
	if c := bom.Metadata.Component; c.Type != "application" || c.Name != module || c.Version != releaseVersion {
		t.Errorf("%s: metadata.component %+v, want the application %s %s", base, c, module, releaseVersion)
	}
	i := slices.IndexFunc(bom.Components, func(c component) bool { return c.Name == "k8s.io/client-go" })
	if i < 0 {
		t.Fatalf("%s: no component k8s.io/client-go among %d", base, len(bom.Components))
	}
	if c := bom.Components[i]; c.Version != clientGo || !strings.HasPrefix(c.PURL, "pkg:golang/k8s.io/client-go@"+clientGo) {
		t.Errorf("%s: k8s.io/client-go %+v, want version %s and its package URL", base, c, clientGo)
	}
	t.Logf("%s: CycloneDX %s, %d components", base, bom.SpecVersion, len(bom.Components))
}

// readOCIArchive returns the files of an OCI image layout archive by name, each blob checked
// against the digest it is named by.
func readOCIArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
				t.Errorf("%s: blob %s has sha256 %x", filepath.Base(path), hexDigest, sum)
			}
		}
		files[name] = b
	}
	return files
}

// blob returns the blob d names, checking its size.
func blob(t *testing.T, files map[string][]byte, d ociDescriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, ok := files["blobs/sha256/"+hexDigest]
	if !ok {
		t.Fatalf("the archive has no blob %s", d.Digest)
	}
	if int64(len(b)) != d.Size {
		t.Errorf("blob %s: %d bytes, its descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

func decodeJSON(t *testing.T, what string, b []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkImageArchive checks the image archive (see TestRelease) and returns the multi-arch
// index's digest.
func checkImageArchive(t *testing.T, path, dir, name, image, commit string) string {
	t.Helper()
	files := readOCIArchive(t, path)
	var layout struct {
		Version string `json:"imageLayoutVersion"`
	}
	if decodeJSON(t, "oci-layout", files["oci-layout"], &layout); layout.Version != "1.0.0" {
		t.Errorf("oci-layout: imageLayoutVersion %q, want 1.0.0", layout.Version)
	}
	var top ociIndex
	decodeJSON(t, "index.json", files["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndexType {
		t.Fatalf("index.json names %+v, want one image index", top.Manifests)
	}
	digest := top.Manifests[0].Digest
	if ref := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != image+":"+releaseVersion {
		t.Errorf("index.json names the index %q, want %s:%s (the name podman load gives it)", ref, image, releaseVersion)
	}
	var index ociIndex
	decodeJSON(t, "the index "+digest, blob(t, files, top.Manifests[0]), &index)
	if index.MediaType != ociIndexType || index.SchemaVersion != 2 {
		t.Errorf("the index %s: mediaType %q schemaVersion %d", digest, index.MediaType, index.SchemaVersion)
	}
	var platforms []string
	for _, m := range index.Manifests {
		if m.Platform == nil {
			t.Fatalf("the index's manifest %s has no platform", m.Digest)
		}
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if slices.Sort(platforms); !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Fatalf("the index's manifests are for %v, want exactly linux/amd64 and linux/arm64", platforms)
	}
	for _, d := range index.Manifests {
		arch := d.Platform.Architecture
		var m ociManifest
		decodeJSON(t, "manifest "+d.Digest, blob(t, files, d), &m)
		if d.MediaType != ociManifestType || m.MediaType != ociManifestType {
			t.Errorf("%s manifest: mediaType %q (descriptor %q), want %s", arch, m.MediaType, d.MediaType, ociManifestType)
		}
		var c ociConfig
		decodeJSON(t, "config "+m.Config.Digest, blob(t, files, m.Config), &c)
		if c.OS != "linux" || c.Architecture != arch {
			t.Errorf("%s manifest: its config is for %s/%s", arch, c.OS, c.Architecture)
		}
		if c.Config.User != "65532:65532" || !slices.Equal(c.Config.Entrypoint, []string{"/cascade"}) {
			t.Errorf("%s config: user %q entrypoint %q, want 65532:65532 and /cascade", arch, c.Config.User, c.Config.Entrypoint)
		}
		if l := c.Config.Labels; l["org.opencontainers.image.version"] != releaseVersion || l["org.opencontainers.image.revision"] != commit {
			t.Errorf("%s config: labels %v, want version %s and revision %s", arch, l, releaseVersion, commit)
		}
		if len(m.Layers) != 1 || m.Layers[0].MediaType != ociLayerGzip || len(c.RootFS.DiffIDs) != 1 {
			t.Fatalf("%s manifest: layers %+v, diff_ids %v: want the binary's one gzip layer", arch, m.Layers, c.RootFS.DiffIDs)
		}
		// The layer: one file, cascade, the released linux binary of this architecture.
		zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, m.Layers[0])))
		if err != nil {
			t.Fatal(err)
		}
		diff := sha256.New()
		lr := tar.NewReader(io.TeeReader(zr, diff))
		var regular []string
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s layer: %v", arch, err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			regular = append(regular, h.Name)
			b, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(b); strings.TrimPrefix(h.Name, "/") == "cascade" && hex.EncodeToString(sum[:]) != sha256File(t, filepath.Join(dir, name+"-linux-"+arch)) {
				t.Errorf("%s layer: /cascade is not %s-linux-%s", arch, name, arch)
			}
		}
		if _, err := io.Copy(io.Discard, zr); err != nil { // the tar's padding, part of the diff ID
			t.Fatal(err)
		}
		if !slices.Equal(regular, []string{"cascade"}) && !slices.Equal(regular, []string{"/cascade"}) {
			t.Errorf("%s layer: files %v, want cascade alone", arch, regular)
		}
		if got := "sha256:" + hex.EncodeToString(diff.Sum(nil)); got != c.RootFS.DiffIDs[0] {
			t.Errorf("%s layer: uncompressed digest %s, the config's diff_id %s", arch, got, c.RootFS.DiffIDs[0])
		}
	}
	t.Logf("image index %s: %v", digest, platforms)
	return digest
}

// checkInstallYAML: install.yaml is deploy/base with the Deployment's image pinned by the
// index's digest; no object names the image by tag; the API server accepts it (server-side
// dry run, into the namespace deploy/base creates).
func checkInstallYAML(t *testing.T, path, pinned string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	repo, _, _ := strings.Cut(pinned, "@")
	if n := strings.Count(string(b), repo); n != 1 {
		t.Errorf("install.yaml names %s %d times, want once (the Deployment's image)", repo, n)
	}
	found := false
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("install.yaml: %v", err)
		}
		if d.Kind != "Deployment" || d.Name != "cascade" {
			continue
		}
		found = true
		if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != pinned {
			t.Errorf("install.yaml: the Deployment's containers %+v, want the image %s", c, pinned)
		}
	}
	if !found {
		t.Fatal("install.yaml has no Deployment cascade")
	}
	deployBase(t) // the namespace, which a server-side dry run cannot create for the objects in it
	if out, err := adminKubectl("apply", "--dry-run=server", "-f", path); err != nil {
		t.Fatal(err)
	} else if strings.Contains(out, "Warning:") {
		t.Errorf("kubectl apply --dry-run=server -f install.yaml warns:\n%s", out)
	}
}

// checkChart: the packaged chart's Chart.yaml has the version (without its v) and the
// appVersion, and the chart renders the image at that tag by default.
func checkChart(t *testing.T, path, image string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	var meta struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "cascade/Chart.yaml" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &meta); err != nil {
			t.Fatalf("Chart.yaml: %v", err)
		}
		found = true
	}
	if !found {
		t.Fatalf("%s has no cascade/Chart.yaml", filepath.Base(path))
	}
	if meta.Name != "cascade" || meta.Version != strings.TrimPrefix(releaseVersion, "v") || meta.AppVersion != releaseVersion {
		t.Errorf("Chart.yaml: %+v, want cascade %s appVersion %s", meta, strings.TrimPrefix(releaseVersion, "v"), releaseVersion)
	}
	out, err := helm(t, "template", "cascade", path, "--namespace", "cascade-system")
	if err != nil {
		t.Fatal(err)
	}
	if want := "image: " + image + ":" + releaseVersion + "\n"; !strings.Contains(out, want) {
		t.Errorf("helm template of the packaged chart does not render %q", strings.TrimSpace(want))
	}
}

// pluginArchive is the name of the kubectl plugin archive of platform p in release name.
func pluginArchive(name string, p [2]string) string {
	return "kubectl-" + name + "-" + p[0] + "-" + p[1] + ".tar.gz"
}

// checkPluginArchive: the platform's kubectl plugin archive holds kubectl-cascade (executable,
// the platform's released binary byte for byte) and LICENSE (the repository's), regular files
// alone (krew extracts nothing else); the host's kubectl-cascade, extracted, calls itself
// `kubectl cascade` and prints the version.
func checkPluginArchive(t *testing.T, root, dir, name string, p [2]string) {
	t.Helper()
	base := pluginArchive(name, p)
	f, err := os.Open(filepath.Join(dir, base))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", base, err)
	}
	binary, err := os.ReadFile(filepath.Join(dir, name+"-"+p[0]+"-"+p[1]))
	if err != nil {
		t.Fatal(err)
	}
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"kubectl-cascade": binary, "LICENSE": license}
	var names []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		names = append(names, h.Name)
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s: %s is of type %q, not a regular file (krew extracts regular files and directories only)", base, h.Name, h.Typeflag)
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[h.Name]; ok && !bytes.Equal(b, w) {
			t.Errorf("%s: %s is not %s", base, h.Name, map[string]string{"kubectl-cascade": name + "-" + p[0] + "-" + p[1], "LICENSE": "the repository's LICENSE"}[h.Name])
		}
		if h.Name == "kubectl-cascade" && h.Mode&0o111 == 0 {
			t.Errorf("%s: kubectl-cascade has mode %o, not executable", base, h.Mode)
		}
	}
	if slices.Sort(names); !slices.Equal(names, []string{"LICENSE", "kubectl-cascade"}) {
		t.Errorf("%s holds %v, want kubectl-cascade and LICENSE", base, names)
	}
	if p[0] != runtime.GOOS || p[1] != runtime.GOARCH {
		return
	}
	plugin := filepath.Join(t.TempDir(), "kubectl-cascade")
	if err := os.WriteFile(plugin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(plugin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage:\n  kubectl cascade [command]\n") || !strings.Contains(string(out), "\n  status ") {
		t.Errorf("kubectl-cascade (no command): %v, want the help of kubectl cascade:\n%s", err, out)
	}
	out, err = exec.Command(plugin, "version", "-o", "json").CombinedOutput()
	var v struct {
		Version string `json:"version"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != releaseVersion {
		t.Errorf("kubectl-cascade version -o json: %v\n%s", err, out)
	}
}

// checkKrewManifest: cascade.yaml is the krew plugin manifest (krew's index format) of the
// release's plugin archives: the plugin cascade at the version, one platform per archive with
// its os and arch, its URI under releaseURL and its sha256, kubectl-cascade and LICENSE
// installed, kubectl-cascade the binary; every field krew's validation requires.
func checkKrewManifest(t *testing.T, dir, name, releaseURL string, platforms [][2]string) {
	t.Helper()
	type platform struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		URI    string `json:"uri"`
		Sha256 string `json:"sha256"`
		Files  []struct {
			From string `json:"from"`
			To   string `json:"to"`
		} `json:"files"`
		Bin string `json:"bin"`
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string     `json:"version"`
			Homepage         string     `json:"homepage"`
			ShortDescription string     `json:"shortDescription"`
			Description      string     `json:"description"`
			Caveats          string     `json:"caveats"`
			Platforms        []platform `json:"platforms"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "cascade.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("cascade.yaml: %v\n%s", err, b)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "cascade" ||
		m.Spec.Version != releaseVersion || m.Spec.ShortDescription == "" || m.Spec.Homepage == "" {
		t.Errorf("cascade.yaml: apiVersion %q kind %q name %q version %q shortDescription %q homepage %q", m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version, m.Spec.ShortDescription, m.Spec.Homepage)
	}
	if len(m.Spec.Platforms) != len(platforms) {
		t.Errorf("cascade.yaml has %d platforms, the release %d archives", len(m.Spec.Platforms), len(platforms))
	}
	sha := regexp.MustCompile(`^[a-f0-9]{64}$`)
	for _, p := range platforms {
		archive := pluginArchive(name, p)
		i := slices.IndexFunc(m.Spec.Platforms, func(pl platform) bool {
			return pl.Selector.MatchLabels["os"] == p[0] && pl.Selector.MatchLabels["arch"] == p[1]
		})
		if i < 0 {
			t.Errorf("cascade.yaml has no platform %s/%s", p[0], p[1])
			continue
		}
		pl := m.Spec.Platforms[i]
		if len(pl.Selector.MatchLabels) != 2 || pl.URI != releaseURL+"/"+archive || !sha.MatchString(pl.Sha256) || pl.Bin != "kubectl-cascade" {
			t.Errorf("cascade.yaml, %s/%s: %+v; want the URI %s/%s and the binary kubectl-cascade", p[0], p[1], pl, releaseURL, archive)
		}
		if got := sha256File(t, filepath.Join(dir, archive)); pl.Sha256 != got {
			t.Errorf("cascade.yaml, %s/%s: sha256 %s, %s has %s", p[0], p[1], pl.Sha256, archive, got)
		}
		var files []string
		for _, f := range pl.Files {
			files = append(files, f.From+" -> "+f.To)
		}
		if !slices.Equal(files, []string{"kubectl-cascade -> .", "LICENSE -> ."}) {
			t.Errorf("cascade.yaml, %s/%s: files %v, want kubectl-cascade and LICENSE", p[0], p[1], files)
		}
	}
	t.Logf("cascade.yaml: krew plugin %s %s, %d platforms", m.Metadata.Name, m.Spec.Version, len(m.Spec.Platforms))
}
