package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// writeArchive writes a gzipped tar of files (name: mode) into dir as name.
func writeArchive(t *testing.T, dir, name string, files map[string]int64, typ byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for f, mode := range files {
		body := []byte("contents of " + f)
		h := &tar.Header{Name: f, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}
		if f == bin && typ != tar.TypeReg {
			h = &tar.Header{Name: f, Mode: mode, Typeflag: typ, Linkname: "LICENSE"}
			body = nil
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestManifest: one platform per archive, its selector from the name, its URI under the URL,
// the archive's sha256, kubectl-cascade and LICENSE installed, kubectl-cascade the binary; what
// krew's own validation asks of a manifest.
func TestManifest(t *testing.T) {
	dir := t.TempDir()
	good := map[string]int64{bin: 0o755, "LICENSE": 0o644}
	linux := writeArchive(t, dir, "kubectl-cascade-v1.2.3-linux-amd64.tar.gz", good, tar.TypeReg)
	darwin := writeArchive(t, dir, "kubectl-cascade-v1.2.3-darwin-arm64.tar.gz", good, tar.TypeReg)
	b, err := manifest("v1.2.3", "https://example.com/releases/download/v1.2.3/", []string{linux, darwin})
	if err != nil {
		t.Fatal(err)
	}
	var p Plugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "cascade" ||
		p.Spec.Version != "v1.2.3" || p.Spec.ShortDescription == "" || len(p.Spec.Platforms) != 2 {
		t.Fatalf("manifest:\n%s", b)
	}
	for i, want := range []struct{ os, arch, path string }{{"darwin", "arm64", darwin}, {"linux", "amd64", linux}} {
		pl := p.Spec.Platforms[i]
		if pl.Selector.MatchLabels["os"] != want.os || pl.Selector.MatchLabels["arch"] != want.arch || len(pl.Selector.MatchLabels) != 2 ||
			pl.URI != "https://example.com/releases/download/v1.2.3/"+filepath.Base(want.path) || pl.Sha256 != sha(t, want.path) ||
			pl.Bin != "kubectl-cascade" || len(pl.Files) != 2 || pl.Files[0] != (File{From: "kubectl-cascade", To: "."}) || pl.Files[1] != (File{From: "LICENSE", To: "."}) {
			t.Errorf("platform %d: %+v", i, pl)
		}
	}

	for _, tt := range []struct {
		name, version string
		archive       func() string
		want          string
	}{
		{"a version without v", "1.2.3", func() string { return linux }, "is not vX.Y.Z"},
		{"an archive of another version", "v1.2.4", func() string { return linux }, "is not kubectl-cascade-v1.2.4-OS-ARCH.tar.gz"},
		{"no binary", "v1.2.3", func() string {
			return writeArchive(t, t.TempDir(), "kubectl-cascade-v1.2.3-linux-arm64.tar.gz", map[string]int64{"LICENSE": 0o644}, tar.TypeReg)
		}, "holds no kubectl-cascade"},
		{"a binary that is a hard link", "v1.2.3", func() string {
			return writeArchive(t, t.TempDir(), "kubectl-cascade-v1.2.3-linux-arm64.tar.gz", good, tar.TypeLink)
		}, "not a regular file"},
		{"a binary that cannot run", "v1.2.3", func() string {
			return writeArchive(t, t.TempDir(), "kubectl-cascade-v1.2.3-linux-arm64.tar.gz", map[string]int64{bin: 0o644, "LICENSE": 0o644}, tar.TypeReg)
		}, "not executable"},
	} {
		if _, err := manifest(tt.version, "https://example.com/d", []string{tt.archive()}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := manifest("v1.2.3", "https://example.com/d", []string{linux, linux}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("an archive twice: %v", err)
	}
}
