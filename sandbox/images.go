package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
)

// ServiceImages builds the stand-in service (containers/testdata/svc: it
// seeds its data directories and serves their checksums) static from the
// module at modRoot, and imports it into the local Docker engine once per
// version, as refs[version], with ENTRYPOINT /svc, VOLUME /anon and
// SVC_VERSION set. No registry is needed: the image is one file.
func ServiceImages(ctx context.Context, modRoot string, refs map[string]string) error {
	dir, err := os.MkdirTemp("", "adoption-svc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "svc")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./containers/testdata/svc")
	build.Dir = modRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the service: %v: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "svc", Mode: 0o755, Size: int64(len(b)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	versions := make([]string, 0, len(refs))
	for v := range refs {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	for _, v := range versions {
		imp := exec.CommandContext(ctx, "docker", "import", "--change", `ENTRYPOINT ["/svc"]`, "--change", `VOLUME ["/anon"]`,
			"--change", "ENV SVC_VERSION="+v, "-", refs[v])
		imp.Stdin = bytes.NewReader(buf.Bytes())
		if out, err := imp.CombinedOutput(); err != nil {
			return fmt.Errorf("docker import %s: %v: %s", refs[v], err, out)
		}
	}
	return nil
}
