package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// storeFile is the store's file in data_dir (internal/store.FileName; not
// imported so that doctor stays off the storage layer).
const storeFile = "tollgate.db"

// dataDir: data_dir is (or can be created as) a directory this process can
// write, where a written file can be fsync'd, and whose store file no other
// process holds. It leaves nothing behind.
func (r *runner) dataDir() Result {
	dir := r.t.DataDir
	res := Result{Check: "data_dir"}
	const fixPerm = "make data_dir a directory the service's user owns (mode 0700), e.g. chown tollgate: DIR; run the doctor as that user (sudo -u tollgate tollgate doctor ...)"
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		parent := existingAncestor(dir)
		tmp, err := os.MkdirTemp(parent, ".tollgate-doctor-")
		if err != nil {
			res.Status = Fail
			res.Detail = fmt.Sprintf("%s does not exist and cannot be created in %s: %v", dir, parent, err)
			res.Fix = fixPerm
			return res
		}
		defer os.Remove(tmp)
		dir = tmp // the fsync test runs where the directory will be
		res.Detail = fmt.Sprintf("%s does not exist yet; Tollgate will create it (%s is writable)", r.t.DataDir, parent)
	case err != nil:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), fixPerm
		return res
	case !fi.IsDir():
		res.Status = Fail
		res.Detail = dir + " is not a directory"
		res.Fix = "point data_dir at a directory"
		return res
	}
	took, err := fsyncProbe(dir)
	if err != nil {
		res.Status = Fail
		res.Detail = fmt.Sprintf("%s: %v", r.t.DataDir, err)
		res.Fix = fixPerm
		if errors.Is(err, errSync) {
			res.Fix = "the filesystem refuses fsync: put data_dir on a local disk filesystem (ext4, xfs)"
		}
		return res
	}
	if err := lockFree(filepath.Join(dir, storeFile)); err != nil {
		res.Status = Fail
		res.Detail = err.Error()
		res.Fix = "another process (a running Tollgate?) holds the store: stop it, or give this instance its own data_dir"
		return res
	}
	if res.Detail == "" {
		res.Detail = r.t.DataDir + " is writable"
	}
	res.Detail += fmt.Sprintf("; a 4 KiB write and fsync took %s", took.Round(10*time.Microsecond))
	return res
}

var errSync = errors.New("fsync failed")

// fsyncProbe writes, fsyncs and removes a file in dir, and fsyncs dir, as
// the store does for each change; it returns how long the fsync took.
func fsyncProbe(dir string) (time.Duration, error) {
	f, err := os.CreateTemp(dir, ".tollgate-doctor-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("%w: %v", errSync, err)
	}
	took := time.Since(start)
	d, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return 0, fmt.Errorf("%w on the directory: %v", errSync, err)
	}
	return took, nil
}

// existingAncestor returns the nearest existing directory above path.
func existingAncestor(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = path
	}
	for {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// filesystem: data_dir's filesystem keeps what fsync promised. A memory
// filesystem loses it at reboot, a mount without write barriers on power
// loss, and network filesystems make both fsync and the store's file lock
// depend on the server.
func (r *runner) filesystem() Result {
	res := Result{Check: "data_dir filesystem"}
	fsType, opts, err := filesystemOf(existingAncestor(r.t.DataDir))
	if err != nil {
		res.Status, res.Detail = Warn, "could not tell: "+err.Error()
		res.Fix = "check by hand that data_dir is on a local disk filesystem mounted with write barriers"
		return res
	}
	res.Status, res.Detail, res.Fix = classifyFS(fsType, opts)
	return res
}

// classifyFS is the filesystem verdict from its type and mount options.
func classifyFS(fsType string, opts []string) (Status, string, string) {
	desc := fsType
	if len(opts) > 0 {
		desc += " (" + strings.Join(opts, ",") + ")"
	}
	switch fsType {
	case "tmpfs", "ramfs":
		return Warn, desc + ": a memory filesystem; fsync is a no-op and the store is lost at reboot",
			"put data_dir on a disk (Kubernetes: a PersistentVolume, not an emptyDir with medium Memory)"
	case "nfs", "nfs4", "cifs", "smb2", "smb3", "9p", "fuse", "fuseblk", "virtiofs", "ceph", "glusterfs":
		return Warn, desc + ": a network or user-space filesystem; fsync and the store's file lock depend on the server",
			"put data_dir on a local disk filesystem (ext4, xfs)"
	}
	for _, o := range opts {
		if o == "nobarrier" || o == "barrier=0" {
			return Warn, desc + ": mounted without write barriers; fsync does not flush the disk's cache",
				"remount with barriers (remove nobarrier / barrier=0) unless the disk cache is battery-backed"
		}
	}
	return OK, desc, ""
}
