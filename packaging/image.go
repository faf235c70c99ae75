package packaging

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image: distroless-style, built from scratch. One layer holds the
// static binary, /etc/passwd and /etc/group with root and nonroot (65532),
// the CA bundle of the build machine, and the default config
// (packaging/files/image.yaml). It runs as nonroot; its health check calls
// `tollgate health` on the config's admin port (the image has no shell).
const (
	ImageBinary  = "/usr/local/bin/tollgate"
	ImageConfig  = "/etc/tollgate/tollgate.yaml"
	ImageDataDir = "/var/lib/tollgate"
	ImageUser    = "65532:65532"
	// ImageHealthURL is http.address of files/image.yaml, on loopback.
	ImageHealthURL = "http://127.0.0.1:9644/readyz"
	// CABundle is where the build machine's CA certificates are read from
	// and written to in the image.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// ImagePorts are the ports files/image.yaml listens on: the bootstrap, the
// embedded cluster's three brokers (broker_port_base 9100), the admin port.
var ImagePorts = []string{"9092/tcp", "9100/tcp", "9101/tcp", "9102/tcp", "9644/tcp"}

const nonroot = 65532

// Image builds the image for linux/arch around bin (a static linux binary
// for that architecture). filesDir is packaging/files; caBundle is the CA
// file to include ("" to leave it out).
func Image(bin, arch, filesDir, caBundle string, b Build) (v1.Image, error) {
	data, err := rootFS(bin, filesDir, caBundle, b)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: b.Time}, CreatedBy: "go run ./packaging/build", Comment: "tollgate " + b.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: b.Time}
	labels := imageLabels(b)
	cf.Config = imageConfig(labels)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// rootFS is the image's one layer, a tar: the users and groups, the
// resolver's order, the CA bundle (unless caBundle is ""), the config of
// filesDir, the binary bin, and the directories it writes to.
func rootFS(bin, filesDir, caBundle string, b Build) ([]byte, error) {
	cfg, err := os.ReadFile(filepath.Join(filesDir, "image.yaml"))
	if err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	l := newLayer(b.Time)
	l.dir("etc", 0o755, 0)
	l.file("etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
	l.file("etc/group", 0o644, 0, []byte("root:x:0:\nnonroot:x:65532:\n"))
	// Go's resolver reads it to order /etc/hosts before DNS.
	l.file("etc/nsswitch.conf", 0o644, 0, []byte("hosts: files dns\n"))
	if caBundle != "" {
		ca, err := os.ReadFile(caBundle)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		l.file(strings.TrimPrefix(CABundle, "/"), 0o644, 0, ca)
	}
	l.file(strings.TrimPrefix(ImageConfig, "/"), 0o644, 0, cfg)
	l.file(strings.TrimPrefix(ImageBinary, "/"), 0o755, 0, binary)
	l.dir(strings.TrimPrefix(ImageDataDir, "/"), 0o700, nonroot)
	l.dir("home/nonroot", 0o700, nonroot)
	l.dir("tmp", 0o777|fs.ModeSticky, 0)
	return l.bytes()
}

// imageLabels are the OCI labels of the image of b, also its manifest's
// annotations.
func imageLabels(b Build) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "tollgate",
		"org.opencontainers.image.description": "Kafka-protocol quota gateway",
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Commit,
		"org.opencontainers.image.created":     b.Date(),
	}
}

// imageConfig is how the image runs: as nonroot, `tollgate serve` on the
// image's config, in the data directory, with its ports and health check.
func imageConfig(labels map[string]string) v1.Config {
	exposed := map[string]struct{}{}
	for _, p := range ImagePorts {
		exposed[p] = struct{}{}
	}
	return v1.Config{
		User:         ImageUser,
		Entrypoint:   []string{ImageBinary},
		Cmd:          []string{"serve", "--config", ImageConfig},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundle},
		WorkingDir:   ImageDataDir,
		ExposedPorts: exposed,
		Volumes:      map[string]struct{}{ImageDataDir: {}},
		StopSignal:   "SIGTERM",
		Labels:       labels,
		// Docker's extension of the OCI config (OCI has no health check);
		// Kubernetes uses its own probes on the same endpoints.
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", ImageBinary, "health", "--url", ImageHealthURL},
			Interval:    10 * time.Second,
			Timeout:     3 * time.Second,
			StartPeriod: 15 * time.Second,
			Retries:     3,
		},
	}
}

// layer builds a tar with fixed times and owners, parents first.
type layer struct {
	t     time.Time
	names map[string]bool
	ents  []entry
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func newLayer(t time.Time) *layer { return &layer{t: t, names: map[string]bool{}} }

func (l *layer) parents(p string) {
	if d := path.Dir(p); d != "." && !l.names[d] {
		l.dir(d, 0o755, 0)
	}
}

func (l *layer) dir(p string, mode fs.FileMode, owner int) {
	l.parents(p)
	l.names[p] = true
	l.ents = append(l.ents, entry{hdr: l.header(tar.TypeDir, p+"/", mode, owner, 0)})
}

func (l *layer) file(p string, mode fs.FileMode, owner int, data []byte) {
	l.parents(p)
	l.names[p] = true
	l.ents = append(l.ents, entry{hdr: l.header(tar.TypeReg, p, mode, owner, int64(len(data))), data: data})
}

func (l *layer) header(typ byte, p string, mode fs.FileMode, owner int, size int64) tar.Header {
	uname := "root"
	if owner == nonroot {
		uname = "nonroot"
	}
	m := int64(mode.Perm())
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return tar.Header{
		Typeflag: typ, Name: p, Mode: m, Size: size,
		Uid: owner, Gid: owner, Uname: uname, Gname: uname,
		ModTime: l.t, Format: tar.FormatPAX,
	}
}

func (l *layer) bytes() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range l.ents {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ImageTag is the image's tag for a version: the tag grammar has no "+".
func ImageTag(version string) string {
	t := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version, "-")
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// WriteImages writes the images (by architecture) as one multi-platform
// OCI image layout in dir (for skopeo, crane, podman, containerd), and each
// as a `docker load` tarball next to it; it returns the tarballs' paths.
func WriteImages(dir string, images map[string]v1.Image, b Build) ([]string, error) {
	archs := make([]string, 0, len(images))
	for a := range images {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, a := range archs {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        images[a],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a}},
		})
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	tag := ImageTag(b.Version)
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return nil, err
	}
	ref, err := name.NewTag("tollgate:" + tag)
	if err != nil {
		return nil, err
	}
	var tars []string
	for _, a := range archs {
		out := filepath.Join(filepath.Dir(dir), fmt.Sprintf("tollgate_%s_image_linux_%s.tar", tag, a))
		if err := tarball.WriteToFile(out, ref, images[a]); err != nil {
			return nil, err
		}
		tars = append(tars, out)
	}
	return tars, nil
}
