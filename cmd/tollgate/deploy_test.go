package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/internal/app"
)

// The Kubernetes manifests, as far as the test reads them.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		// Service
		ClusterIP string           `yaml:"clusterIP"`
		Selector  yaml.Node        `yaml:"selector"`
		Ports     []k8sServicePort `yaml:"ports"`
		// StatefulSet
		ServiceName string `yaml:"serviceName"`
		Replicas    int    `yaml:"replicas"`
		Template    struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				SecurityContext struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
					FSGroup      int  `yaml:"fsGroup"`
				} `yaml:"securityContext"`
				InitContainers []k8sContainer `yaml:"initContainers"`
				Containers     []k8sContainer `yaml:"containers"`
				Volumes        []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name  string `yaml:"name"`
						Items []struct {
							Key  string `yaml:"key"`
							Path string `yaml:"path"`
						} `yaml:"items"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
	Resources []string `yaml:"resources"` // Kustomization
}

type k8sServicePort struct {
	Name       string    `yaml:"name"`
	Port       int       `yaml:"port"`
	TargetPort yaml.Node `yaml:"targetPort"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe    *k8sProbe `yaml:"startupProbe"`
	LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func loadManifests(t *testing.T) (map[string]*k8sObject, *k8sObject) {
	t.Helper()
	dir := filepath.Join("..", "..", "deploy", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	objs := map[string]*k8sObject{}
	var kust *k8sObject
	var listed []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(false)
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "Kustomization" {
				kust = &o
				continue
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: an object without apiVersion, kind or name", f)
			}
			if o.Kind != "Namespace" && o.Metadata.Namespace != "tollgate" {
				t.Errorf("%s %s: namespace %q", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
			}
			objs[o.Kind+"/"+o.Metadata.Name] = &o
			listed = append(listed, filepath.Base(f))
		}
	}
	if kust == nil {
		t.Fatal("no kustomization.yaml")
	}
	listed = slices.Compact(listed)
	sort.Strings(listed)
	res := slices.Clone(kust.Resources)
	sort.Strings(res)
	if !slices.Equal(res, listed) {
		t.Errorf("kustomization lists %v, the directory holds %v", res, listed)
	}
	return objs, kust
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// resolvePort turns a port given by name or number into its number.
func resolvePort(n yaml.Node, named map[string]int) (int, bool) {
	if v, err := strconv.Atoi(n.Value); err == nil {
		return v, true
	}
	v, ok := named[n.Value]
	return v, ok
}

// The manifests of the three-instance cluster agree with the config reference
// and with the command line: ports, probes, flags, volumes.
func TestKubernetesManifests(t *testing.T) {
	objs, _ := loadManifests(t)
	cm := objs["ConfigMap/tollgate-config"]
	sts := objs["StatefulSet/tollgate"]
	svc := objs["Service/tollgate"]
	if cm == nil || sts == nil || svc == nil || objs["Namespace/tollgate"] == nil {
		t.Fatalf("objects: %v", slices.Sorted(func(yield func(string) bool) {
			for k := range objs {
				if !yield(k) {
					return
				}
			}
		}))
	}

	// Every key of the ConfigMap's file is one the real loader accepts.
	cfg, err := app.Parse("configmap tollgate.yaml", strings.NewReader(cm.Data["tollgate.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's tollgate.yaml does not load: %v", err)
	}

	if sts.Spec.Replicas != 3 {
		t.Errorf("replicas %d", sts.Spec.Replicas)
	}
	if h := objs["Service/"+sts.Spec.ServiceName]; h == nil || h.Spec.ClusterIP != "None" {
		t.Errorf("serviceName %q is not a headless Service", sts.Spec.ServiceName)
	}
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]

	// Container ports are exactly the config's: bootstrap, admin, and a run
	// of broker ports from broker_port_base.
	named := map[string]int{}
	var numbers []int
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
		numbers = append(numbers, p.ContainerPort)
	}
	if len(cfg.Listeners) != 1 {
		t.Fatalf("the test expects one listener, the ConfigMap has %d", len(cfg.Listeners))
	}
	l := cfg.Listeners[0]
	if named["kafka"] != port(t, l.Bootstrap) || named["admin"] != port(t, cfg.HTTP.Address) {
		t.Errorf("ports kafka=%d admin=%d; the config listens on %s and %s", named["kafka"], named["admin"], l.Bootstrap, cfg.HTTP.Address)
	}
	brokers := 0
	for name, n := range named {
		if !strings.HasPrefix(name, "broker-") {
			continue
		}
		id, err := strconv.Atoi(strings.TrimPrefix(name, "broker-"))
		if err != nil || n != l.BrokerPortBase+id {
			t.Errorf("port %s=%d; broker_port_base is %d", name, n, l.BrokerPortBase)
		}
		brokers++
	}
	if brokers == 0 || len(c.Ports) != brokers+2 {
		t.Errorf("ports %v: want kafka, admin and the broker ports", numbers)
	}
	slices.Sort(numbers)
	if len(slices.Compact(numbers)) != len(c.Ports) {
		t.Errorf("a port is listed twice: %v", numbers)
	}

	// Probes: liveness /healthz and readiness /readyz on the admin port.
	for what, p := range map[string]*k8sProbe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: missing or not httpGet", what)
			continue
		}
		want := map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"}[what]
		n, ok := resolvePort(p.HTTPGet.Port, named)
		if p.HTTPGet.Path != want || !ok || n != port(t, cfg.HTTP.Address) {
			t.Errorf("%s: %s on port %q (%d); want %s on the admin port %s", what, p.HTTPGet.Path, p.HTTPGet.Port.Value, n, want, cfg.HTTP.Address)
		}
	}

	// The command lines: real subcommands, real flags, the mounted config.
	mounts := func(c k8sContainer) map[string]string {
		m := map[string]string{}
		for _, v := range c.VolumeMounts {
			m[v.Name] = v.MountPath
		}
		return m
	}
	var configVolume string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name {
			configVolume = v.Name
			if len(v.ConfigMap.Items) != 1 || v.ConfigMap.Items[0].Key != "tollgate.yaml" || v.ConfigMap.Items[0].Path != "tollgate.yaml" {
				t.Errorf("config volume items %+v", v.ConfigMap.Items)
			}
		}
	}
	if configVolume == "" {
		t.Fatal("no volume from the ConfigMap")
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Metadata.Name != "data" {
		t.Fatal("want one volumeClaimTemplate named data")
	}
	check := func(c k8sContainer, want string) {
		if len(c.Args) == 0 || c.Args[0] != want {
			t.Errorf("container %s runs %q, want %s", c.Name, c.Args, want)
			return
		}
		if !slices.ContainsFunc(commands(), func(cmd command) bool { return cmd.name == c.Args[0] }) {
			t.Errorf("container %s: %s is not a tollgate command", c.Name, c.Args[0])
		}
		var fs *flag.FlagSet
		var config func() string
		switch want {
		case "serve":
			p := new(string)
			fs, config = serveFlags(p, io.Discard), func() string { return *p }
		case "doctor":
			o := new(doctorOpts)
			fs, config = doctorFlags(o, io.Discard), func() string { return o.config }
		}
		if err := fs.Parse(c.Args[1:]); err != nil || fs.NArg() != 0 {
			t.Errorf("container %s: tollgate %s rejects %q: %v", c.Name, want, c.Args[1:], err)
			return
		}
		path := config()
		m := mounts(c)
		if path != filepath.Join(m[configVolume], "tollgate.yaml") {
			t.Errorf("container %s reads %q; the ConfigMap is mounted at %q", c.Name, path, m[configVolume])
		}
		if m["data"] != cfg.DataDir {
			t.Errorf("container %s mounts data at %q; data_dir is %q", c.Name, m["data"], cfg.DataDir)
		}
		if c.Image != pod.Containers[0].Image {
			t.Errorf("container %s runs image %q, tollgate %q", c.Name, c.Image, pod.Containers[0].Image)
		}
		if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("container %s: securityContext %+v", c.Name, c.SecurityContext)
		}
	}
	check(c, "serve")
	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers, want the doctor", len(pod.InitContainers))
	}
	check(pod.InitContainers[0], "doctor")
	if sc := pod.SecurityContext; !sc.RunAsNonRoot || sc.RunAsUser != 65532 || sc.FSGroup != 65532 {
		t.Errorf("pod securityContext %+v: want the image's non-root user 65532", sc)
	}

	// The client Service reaches the bootstrap and every broker port, on
	// the pods of the StatefulSet, under the name the config advertises.
	var sel map[string]string
	if err := svc.Spec.Selector.Decode(&sel); err != nil || len(sel) == 0 {
		t.Fatalf("Service selector: %v", err)
	}
	for k, v := range sel {
		if sts.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service selects %s=%s, the pods are labelled %v", k, v, sts.Spec.Template.Metadata.Labels)
		}
	}
	served := map[int]bool{}
	for _, p := range svc.Spec.Ports {
		n, ok := resolvePort(p.TargetPort, named)
		if !ok || n != p.Port {
			t.Errorf("Service port %s: %d → %q, not a container port of the same number", p.Name, p.Port, p.TargetPort.Value)
		}
		served[n] = true
	}
	for name, n := range named {
		if name != "admin" && !served[n] {
			t.Errorf("the client Service does not carry %s (%d): clients are handed that port", name, n)
		}
	}
	if want := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Metadata.Name, svc.Metadata.Namespace); l.AdvertisedHost != want {
		t.Errorf("advertised_host %q, want the client Service %q", l.AdvertisedHost, want)
	}
}
