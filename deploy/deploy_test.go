// Package deploy holds the files that run surgepay elsewhere than `make
// run`: the container image (docker/), a scaled-out Docker Compose set-up
// (compose/), Kubernetes manifests (kubernetes/) and a local cluster
// (local/). It has no Go code; these tests check the files, in CI, without
// Docker or a cluster: every YAML document parses; the Deployment's probes,
// resources and security context; what the Service and the
// PodDisruptionBudget select; the Secret template's keys; the compose
// services and their healthchecks; the Dockerfile's stages; and each
// surgepay.toml through surgepay's own configuration loader, from where
// the container finds it (the ConfigMap mounted as a folder, laid out as
// the kubelet does; the folder compose bind-mounts), with the environment
// its container gets and its secrets stubbed, and that a changed
// ConfigMap reaches serve's watch of the file. `haproxy -c`
// checks the compose HAProxy configuration where haproxy is installed (CI
// installs it: there a missing haproxy fails the test).
package deploy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"

	"github.com/surgepay/surgepay/cache"
	"github.com/surgepay/surgepay/config"
	"github.com/surgepay/surgepay/tlsconfig"
)

// ---------------------------------------------------------------- YAML

// yamlDocs returns the documents of a YAML file (several, separated by
// ---), each decoded into a generic value; empty documents are dropped.
func yamlDocs(t *testing.T, file string) []*yaml.Node {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", file, len(docs)+1, err)
		}
		if len(n.Content) > 0 && n.Content[0].Kind != 0 && n.Content[0].Tag != "!!null" {
			docs = append(docs, &n)
		}
	}
}

func decodeNode(t *testing.T, file string, n *yaml.Node, out any) {
	t.Helper()
	if err := n.Decode(out); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestYAMLParses reads every YAML file of the deploy folder, document by
// document.
func TestYAMLParses(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compose/compose.yaml", "kubernetes/deployment.yaml", "kubernetes/kustomization.yaml"} {
		if !slices.Contains(files, filepath.FromSlash(want)) {
			t.Errorf("%s is missing", want)
		}
	}
	for _, f := range files {
		if len(yamlDocs(t, f)) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
	}
}

// ---------------------------------------------------------- Kubernetes

type k8sObject struct {
	File       string
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	node *yaml.Node
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
		ConfigMapKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"configMapKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"` // a number or a port's name
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env            []envVar `yaml:"env"`
	StartupProbe   *probe   `yaml:"startupProbe"`
	ReadinessProbe *probe   `yaml:"readinessProbe"`
	LivenessProbe  *probe   `yaml:"livenessProbe"`
	Lifecycle      *struct {
		PreStop any `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *securityContext `yaml:"securityContext"`
	VolumeMounts    []volumeMount    `yaml:"volumeMounts"`
}

type volumeMount struct {
	Name        string `yaml:"name"`
	MountPath   string `yaml:"mountPath"`
	ReadOnly    bool   `yaml:"readOnly"`
	SubPath     string `yaml:"subPath"`
	SubPathExpr string `yaml:"subPathExpr"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string `yaml:"name"`
		Items []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"configMap"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
	EmptyDir *struct {
		Medium string `yaml:"medium"`
	} `yaml:"emptyDir"`
}

type podTemplate struct {
	Metadata struct {
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		TerminationGracePeriodSeconds *int             `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               *securityContext `yaml:"securityContext"`
		InitContainers                []container      `yaml:"initContainers"`
		Containers                    []container      `yaml:"containers"`
		Volumes                       []volume         `yaml:"volumes"`
	} `yaml:"spec"`
}

type deployment struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template podTemplate `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Spec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdb struct {
	Spec struct {
		MinAvailable   *string `yaml:"minAvailable"`
		MaxUnavailable *string `yaml:"maxUnavailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

// k8sObjects reads every object of deploy/kubernetes but the
// kustomization.
func k8sObjects(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []k8sObject
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for i, n := range yamlDocs(t, f) {
			o := k8sObject{File: f, node: n}
			decodeNode(t, f, n, &o)
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: document %d lacks apiVersion, kind or metadata.name", f, i+1)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func findObject(t *testing.T, objs []k8sObject, kind, name string, out any) k8sObject {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			decodeNode(t, o.File, o.node, out)
			return o
		}
	}
	t.Fatalf("deploy/kubernetes: no %s %q", kind, name)
	return k8sObject{}
}

func containerNamed(t *testing.T, cs []container, name string) *container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// portOf resolves a probe's or a Service's port (a number or a name) to
// the container's port number.
func portOf(c *container, port string) int {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

func envValue(c *container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// selects reports whether a label selector (matchLabels, or a Service's
// selector) selects pods with these labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// quantity parses a Kubernetes CPU or memory quantity (500m, 2, 384Mi,
// 1Gi) into millicores or bytes.
func quantity(t *testing.T, s string) int64 {
	t.Helper()
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"m", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", s, err)
			}
			return v * u.mult
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", s, err)
	}
	return int64(v * 1000) // cores to millicores (memory quantities here always carry a unit)
}

func checkSecurity(t *testing.T, where string, pod, c *securityContext) {
	t.Helper()
	nonRoot := (c != nil && c.RunAsNonRoot != nil && *c.RunAsNonRoot) || (pod != nil && pod.RunAsNonRoot != nil && *pod.RunAsNonRoot)
	if !nonRoot {
		t.Errorf("%s: runAsNonRoot is not true", where)
	}
	if c == nil {
		t.Errorf("%s: no securityContext", where)
		return
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation is not false", where)
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", where)
	}
	if !slices.Contains(c.Capabilities.Drop, "ALL") {
		t.Errorf("%s: capabilities do not drop ALL", where)
	}
}

func checkResources(t *testing.T, where string, c *container) {
	t.Helper()
	for _, r := range []string{"cpu", "memory"} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req == "" || lim == "" {
			t.Errorf("%s: resources: %s request %q, limit %q: both are needed", where, r, req, lim)
			continue
		}
		if quantity(t, req) > quantity(t, lim) {
			t.Errorf("%s: resources: %s request %s above its limit %s", where, r, req, lim)
		}
	}
}

// checkImage refuses an image without a tag, or tagged latest.
func checkImage(t *testing.T, where, image string) {
	t.Helper()
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	if !ok || tag == "" || tag == "latest" {
		t.Errorf("%s: image %q: name a version (a tag other than latest)", where, image)
	}
}

// TestKubernetes checks deploy/kubernetes: the Deployment's probes,
// resources and security context, the Service and PodDisruptionBudget
// selectors, the Secret template, the kustomization's list, and
// surgepay.toml through surgepay's configuration loader.
func TestKubernetes(t *testing.T) {
	objs := k8sObjects(t)
	var d deployment
	findObject(t, objs, "Deployment", "surgepay", &d)
	pod := d.Spec.Template
	podLabels := pod.Metadata.Labels
	if r := d.Spec.Replicas; r == nil || *r != 3 {
		t.Errorf("Deployment surgepay: replicas %s, want 3", intOrUnset(r))
	}
	if !selects(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment surgepay: selector %v does not select its own pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	c := containerNamed(t, pod.Spec.Containers, "surgepay")
	checkImage(t, "Deployment surgepay", c.Image)
	if !slices.Equal(c.Args, []string{"serve"}) && !slices.Equal(c.Command, []string{"/surgepay", "serve"}) {
		t.Errorf("container surgepay runs %v %v, want serve", c.Command, c.Args)
	}

	// The listeners the environment sets, and the container's ports.
	listen, ok := envValue(c, "SURGEPAY_LISTEN")
	if !ok {
		t.Fatal("container surgepay: no SURGEPAY_LISTEN")
	}
	adminListen, ok := envValue(c, "SURGEPAY_ADMIN_LISTEN")
	if !ok {
		t.Fatal("container surgepay: no SURGEPAY_ADMIN_LISTEN")
	}
	apiPort, adminPort := listenPort(t, listen), listenPort(t, adminListen)
	if portOf(c, "api") != apiPort {
		t.Errorf("container port api is %d, SURGEPAY_LISTEN %s", portOf(c, "api"), listen)
	}
	if portOf(c, "admin") != adminPort {
		t.Errorf("container port admin is %d, SURGEPAY_ADMIN_LISTEN %s", portOf(c, "admin"), adminListen)
	}

	// Probes: the admin listener serves /healthz and /readyz without a
	// token (admin/server.go, admin/auth.go openPaths); /readyz there is
	// the one that checks the store.
	for _, p := range []struct {
		name string
		pr   *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"startupProbe", c.StartupProbe, "/healthz"}} {
		switch {
		case p.pr == nil || p.pr.HTTPGet == nil:
			t.Errorf("container surgepay: no %s with httpGet", p.name)
		case p.pr.HTTPGet.Path != p.path:
			t.Errorf("container surgepay: %s path %s, want %s", p.name, p.pr.HTTPGet.Path, p.path)
		case portOf(c, p.pr.HTTPGet.Port) != adminPort:
			t.Errorf("container surgepay: %s port %q is not the admin listener's %d", p.name, p.pr.HTTPGet.Port, adminPort)
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		t.Errorf("container surgepay: a preStop hook; shutdown_delay does its job (deployment.yaml says why)")
	}

	checkResources(t, "container surgepay", c)
	checkSecurity(t, "container surgepay", pod.Spec.SecurityContext, c.SecurityContext)
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		checkImage(t, "init container "+ic.Name, ic.Image)
		checkResources(t, "init container "+ic.Name, ic)
		checkSecurity(t, "init container "+ic.Name, pod.Spec.SecurityContext, ic.SecurityContext)
	}

	// The Service and the PodDisruptionBudget select these pods, and
	// only these.
	others := otherPodLabels(t, objs, "surgepay")
	var svc service
	findObject(t, objs, "Service", "surgepay", &svc)
	if !selects(svc.Spec.Selector, podLabels) {
		t.Errorf("Service surgepay: selector %v does not select the Deployment's pods %v", svc.Spec.Selector, podLabels)
	}
	for name, l := range others {
		if selects(svc.Spec.Selector, l) {
			t.Errorf("Service surgepay: selector %v also selects Deployment %s's pods", svc.Spec.Selector, name)
		}
	}
	if len(svc.Spec.Ports) == 0 || portOf(c, svc.Spec.Ports[0].TargetPort) != apiPort {
		t.Errorf("Service surgepay: its port does not reach the API port %d", apiPort)
	}
	for _, p := range svc.Spec.Ports {
		if portOf(c, p.TargetPort) == adminPort {
			t.Errorf("Service surgepay exposes the admin listener (port %s)", p.TargetPort)
		}
	}
	var budget pdb
	findObject(t, objs, "PodDisruptionBudget", "surgepay", &budget)
	if !selects(budget.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget surgepay: selector %v does not select the Deployment's pods %v", budget.Spec.Selector.MatchLabels, podLabels)
	}
	for name, l := range others {
		if selects(budget.Spec.Selector.MatchLabels, l) {
			t.Errorf("PodDisruptionBudget surgepay: selector also selects Deployment %s's pods", name)
		}
	}
	switch b := budget.Spec; {
	case b.MaxUnavailable != nil && *b.MaxUnavailable == "1":
	case b.MinAvailable != nil && *b.MinAvailable == "2":
	default:
		t.Errorf("PodDisruptionBudget surgepay: want maxUnavailable 1 or minAvailable 2 (of 3)")
	}

	checkSecretRefs(t, objs)
	checkKustomization(t, objs)

	// Redis's password: the Secret's, by the environment (the
	// ConfigMap holds no secret: kubernetesConfig checks).
	checkSecretEnv(t, c, "SURGEPAY_REDIS_PASSWORD", "surgepay", "redis-password")

	// surgepay.toml: the ConfigMap's, mounted as a folder and laid out as
	// the kubelet lays it out, at the path serve reads, with the
	// container's environment. (That an update reaches serve:
	// TestKubernetesConfigMapReload.)
	cfg, _ := kubernetesConfig(t, objs, &d, c)
	checkServeConfig(t, "deploy/kubernetes", cfg)
	if cfg.Stage.Replicas != 3 {
		t.Errorf("deploy/kubernetes surgepay.toml: stage.replicas %d, want 3", cfg.Stage.Replicas)
	}
	if cfg.Cache.Redis.Password.Reveal() != stubRedisPassword {
		t.Errorf("deploy/kubernetes: cache.redis.password as loaded is not the Secret's redis-password (SURGEPAY_REDIS_PASSWORD)")
	}
	// The data folder: inside its volume, not the volume's mount point
	// (an emptyDir is 0777, which serve refuses for its data).
	dataMount := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "data" {
			dataMount = m.MountPath
		}
	}
	if dataMount == "" || !strings.HasPrefix(cfg.DataDir, dataMount+"/") {
		t.Errorf("data_dir %q is not a folder inside the data volume's mount %q", cfg.DataDir, dataMount)
	}
	// Memory: the Go runtime's soft limit below the container's.
	if lim := quantity(t, c.Resources.Limits["memory"]); int64(cfg.MemoryLimitMiB)<<20 >= lim || cfg.MemoryLimitMiB == 0 {
		t.Errorf("memory_limit_mib %d is not below the container's memory limit %s", cfg.MemoryLimitMiB, c.Resources.Limits["memory"])
	}
	// Stopping: the readiness probe takes the pod out within
	// shutdown_delay, and the grace period covers the delay, the drain
	// and the webhook deliveries in flight.
	if rp := c.ReadinessProbe; rp != nil {
		period, failures := cmp.Or(rp.PeriodSeconds, 10), cmp.Or(rp.FailureThreshold, 3) // Kubernetes' defaults
		if out := time.Duration(period*failures)*time.Second + time.Second; cfg.ShutdownDelay.Duration < out {
			t.Errorf("shutdown_delay %s is shorter than the readiness probe's periodSeconds x failureThreshold + 1s = %s",
				cfg.ShutdownDelay.Duration, out)
		}
	}
	need := cfg.ShutdownDelay.Duration + cfg.DrainTimeout.Duration + cfg.Webhooks.Timeout.Duration
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %s is not above shutdown_delay + %s drain + webhooks.timeout = %s", intOrUnset(g), cfg.DrainTimeout.Duration, need)
	}
}

func intOrUnset(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return n
}

// otherPodLabels returns the pod labels of every Deployment but skip.
func otherPodLabels(t *testing.T, objs []k8sObject, skip string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind != "Deployment" || o.Metadata.Name == skip {
			continue
		}
		var d deployment
		decodeNode(t, o.File, o.node, &d)
		out[o.Metadata.Name] = d.Spec.Template.Metadata.Labels
		for i := range d.Spec.Template.Spec.Containers {
			c := &d.Spec.Template.Spec.Containers[i]
			checkImage(t, "Deployment "+o.Metadata.Name, c.Image)
			checkResources(t, "Deployment "+o.Metadata.Name+" container "+c.Name, c)
			checkSecurity(t, "Deployment "+o.Metadata.Name+" container "+c.Name, d.Spec.Template.Spec.SecurityContext, c.SecurityContext)
		}
	}
	return out
}

// checkSecretRefs checks the Secret template: every value a placeholder,
// and every key a Deployment needs (not optional) in it.
func checkSecretRefs(t *testing.T, objs []k8sObject) {
	t.Helper()
	var secret struct {
		StringData map[string]string `yaml:"stringData"`
		Data       map[string]string `yaml:"data"`
	}
	s := findObject(t, objs, "Secret", "surgepay", &secret)
	if len(secret.Data) > 0 {
		t.Errorf("%s: data holds values; a template keeps placeholders in stringData", s.File)
	}
	for k, v := range secret.StringData {
		if !strings.Contains(v, "REPLACE_ME") {
			t.Errorf("%s: %s is not a placeholder (REPLACE_ME): real secrets do not belong in this file", s.File, k)
		}
	}
	configMaps := map[string]bool{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = true
		}
	}
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		var d deployment
		decodeNode(t, o.File, o.node, &d)
		for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				if ref.Name != s.Metadata.Name {
					t.Errorf("%s: container %s: %s reads Secret %q, not %q", o.File, c.Name, e.Name, ref.Name, s.Metadata.Name)
				}
				if _, ok := secret.StringData[ref.Key]; !ok && !ref.Optional {
					t.Errorf("%s: container %s: %s reads key %q, which %s does not have", o.File, c.Name, e.Name, ref.Key, s.File)
				}
			}
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil && !configMaps[v.ConfigMap.Name] {
				t.Errorf("%s: volume %s: no ConfigMap %q in deploy/kubernetes", o.File, v.Name, v.ConfigMap.Name)
			}
		}
	}
}

// checkKustomization checks that kustomization.yaml lists every manifest
// but the Secret template, and only files that exist.
func checkKustomization(t *testing.T, objs []k8sObject) {
	t.Helper()
	var k struct {
		Resources []string `yaml:"resources"`
	}
	docs := yamlDocs(t, "kubernetes/kustomization.yaml")
	decodeNode(t, "kubernetes/kustomization.yaml", docs[0], &k)
	files := map[string]bool{}
	for _, o := range objs {
		files[filepath.Base(o.File)] = true
	}
	for _, r := range k.Resources {
		if !files[r] {
			t.Errorf("kustomization.yaml lists %s, which is not a manifest here", r)
		}
		if r == "secret.yaml" {
			t.Errorf("kustomization.yaml lists secret.yaml: a template of placeholders must not be applied")
		}
	}
	for f := range files {
		if f != "secret.yaml" && !slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
}

// checkSecretEnv checks that the container's variable name comes from
// key of Secret secret (secretKeyRef).
func checkSecretEnv(t *testing.T, c *container, name, secret, key string) {
	t.Helper()
	i := slices.IndexFunc(c.Env, func(e envVar) bool { return e.Name == name })
	if i < 0 {
		t.Errorf("container %s: no %s (from Secret %s, key %s)", c.Name, name, secret, key)
		return
	}
	e := c.Env[i]
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret || e.ValueFrom.SecretKeyRef.Key != key {
		t.Errorf("container %s: %s does not come from Secret %s, key %s (secretKeyRef)", c.Name, name, secret, key)
	}
}

// stubRedisPassword and the other stubs stand for the Secret's values.
const stubRedisPassword = "0123456789abcdef0123456789abcdef"

// secretStubs are the values the Secret's keys are replaced with: valid
// for the configuration loader, secret for nothing.
var secretStubs = map[string]string{
	"postgres-dsn":          "postgres://surgepay:stub@postgres:5432/surgepay?sslmode=verify-full",
	"redis-password":        stubRedisPassword,
	"nats-password":         "stub-nats-password",
	"admin-token":           "stub-admin-token-0123456789abcdef",
	"keyring":               "e30=",
	"settlement-public-key": "",
}

// configPath returns the configuration file the container's serve reads:
// --config in its arguments, else SURGEPAY_CONFIG.
func configPath(c *container) string {
	args := slices.Concat(c.Command, c.Args)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	v, _ := envValue(c, "SURGEPAY_CONFIG")
	return v
}

// configMapMount is the ConfigMap volume that holds the serve container's
// configuration file, laid out by the test in a temporary folder as the
// kubelet lays it out in the pod (kubeletWrite).
type configMapMount struct {
	name  string            // the ConfigMap's name
	files map[string]string // the volume's files (its keys, or its items' paths), their content
	path  string            // the configuration file's path in the volume (surgepay.toml)
	dir   string            // the temporary folder standing for the pod's mountPath
	gen   int               // the kubelet's writes so far
}

// file is the configuration file serve reads, in the temporary folder.
func (m *configMapMount) file() string { return filepath.Join(m.dir, filepath.FromSlash(m.path)) }

// mountConfigMap finds the volume that holds the configuration file the
// container reads (configPath), requires it to be a ConfigMap's mounted as
// a folder (a subPath mount, or a copy on another volume, never sees the
// ConfigMap change), and writes the ConfigMap's files into a temporary
// folder the kubelet's way.
func mountConfigMap(t *testing.T, objs []k8sObject, d *deployment, c *container) *configMapMount {
	t.Helper()
	file := configPath(c)
	if file == "" {
		t.Fatal("container surgepay: neither --config nor SURGEPAY_CONFIG names its configuration file")
	}
	var mount *volumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if (file == m.MountPath || strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")) &&
			(mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = m
		}
	}
	if mount == nil {
		t.Fatalf("container surgepay: its configuration file %s is on no volume it mounts", file)
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v volume) bool { return v.Name == mount.Name })
	if i < 0 || d.Spec.Template.Spec.Volumes[i].ConfigMap == nil {
		t.Fatalf("container surgepay: its configuration file %s is on volume %q, which is not a ConfigMap's: a changed ConfigMap would never reach serve (mount the ConfigMap's folder)",
			file, mount.Name)
	}
	if mount.SubPath != "" || mount.SubPathExpr != "" {
		t.Fatalf("container surgepay: ConfigMap volume %s is mounted at %s with subPath %q, which the kubelet never updates: mount the folder",
			mount.Name, mount.MountPath, mount.SubPath+mount.SubPathExpr)
	}
	if !mount.ReadOnly {
		t.Errorf("container surgepay: ConfigMap volume %s is not mounted readOnly", mount.Name)
	}
	v := d.Spec.Template.Spec.Volumes[i].ConfigMap
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	findObject(t, objs, "ConfigMap", v.Name, &cm)
	m := &configMapMount{name: v.Name, files: map[string]string{}, path: strings.TrimPrefix(file, strings.TrimSuffix(mount.MountPath, "/")+"/"), dir: t.TempDir()}
	if len(v.Items) == 0 {
		maps.Copy(m.files, cm.Data)
	}
	for _, it := range v.Items {
		content, ok := cm.Data[it.Key]
		if !ok {
			t.Fatalf("volume %s: ConfigMap %s has no key %s", mount.Name, v.Name, it.Key)
		}
		m.files[it.Path] = content
	}
	if _, ok := m.files[m.path]; !ok {
		t.Fatalf("container surgepay reads %s, but volume %s (ConfigMap %s) has no file %s", file, mount.Name, v.Name, m.path)
	}
	kubeletWrite(t, m)
	return m
}

// kubeletWrite writes m.files into m.dir as the kubelet's atomic writer
// lays out a ConfigMap volume and updates it: the files in a new
// timestamped folder, the symbolic link ..data switched to it by a
// rename, and each top-level name a link through ..data. So a file's
// path stays and its modification time changes with every update (serve
// watches that); a subPath mount binds the first folder's file and never
// sees the switch. The first write's files are dated an hour back, so
// that an update's time differs from theirs whatever the clock's
// resolution.
func kubeletWrite(t *testing.T, m *configMapMount) {
	t.Helper()
	m.gen++
	stamp := fmt.Sprintf("..2026_01_01_00_00_%02d.000000001", m.gen)
	back := time.Now().Add(-time.Hour)
	for p, content := range m.files {
		f := filepath.Join(m.dir, stamp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if m.gen == 1 {
			if err := os.Chtimes(f, back, back); err != nil {
				t.Fatal(err)
			}
		}
	}
	old, _ := os.Readlink(filepath.Join(m.dir, "..data"))
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(stamp, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for p := range m.files {
		top, _, _ := strings.Cut(p, "/")
		link := filepath.Join(m.dir, top)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", top), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(m.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// kubernetesEnv returns the serve container's environment: the image's
// defaults, the literal values, and the Secret's keys stubbed.
func kubernetesEnv(t *testing.T, c *container) map[string]string {
	t.Helper()
	env := dockerfileEnv(t)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := secretStubs[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("no stub for the Secret's key %s (add one to secretStubs)", e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = v
		default:
			t.Fatalf("container surgepay: %s: only values and secretKeyRef are stubbed here", e.Name)
		}
	}
	return env
}

// kubernetesConfig loads the configuration file the serve container reads,
// from its ConfigMap laid out the kubelet's way (mountConfigMap), with the
// container's environment (kubernetesEnv), through surgepay's own loader.
func kubernetesConfig(t *testing.T, objs []k8sObject, d *deployment, c *container) (config.Config, *configMapMount) {
	t.Helper()
	m := mountConfigMap(t, objs, d, c)
	checkNoSecrets(t, "ConfigMap "+m.name+" "+m.path, m.files[m.path])
	cfg, err := config.Load(m.file(), mapEnv(kubernetesEnv(t, c)))
	if err != nil {
		t.Fatalf("deploy/kubernetes surgepay.toml does not load: %v", err)
	}
	return cfg, m
}

// secretKeyTOML matches the settings that hold secrets: they come from the
// environment, never from a file in a ConfigMap or in git.
var secretKeyTOML = regexp.MustCompile(`(?i)(password|token|dsn|secret|private_key)$`)

// checkNoSecrets fails for a TOML file that sets a secret setting
// (postgres.dsn, cache.redis.password, stage.nats_password, ...).
func checkNoSecrets(t *testing.T, where, content string) {
	t.Helper()
	var doc map[string]any
	if _, err := toml.Decode(content, &doc); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(prefix+k+".", e)
			}
		case []map[string]any:
			for _, e := range v {
				walk(prefix, e)
			}
		default:
			if k := strings.TrimSuffix(prefix, "."); secretKeyTOML.MatchString(k) {
				t.Errorf("%s sets %s: give it by the environment (docs/configuration.md names its variable)", where, k)
			}
		}
	}
	walk("", doc)
}

// reloadWait bounds the wait for serve's watch to see a changed file: it
// polls every config.PollInterval (500 ms); the rest is room for a loaded
// CI machine under -race.
const reloadWait = 20 * config.PollInterval

// TestKubernetesConfigMapReload changes the ConfigMap the serve container
// reads its configuration from, the kubelet's way (kubeletWrite), and
// checks that serve's watch of the file (config.Watch, as serve calls it)
// reports the change and that the file then loads with the new settings:
// an updated ConfigMap reaches running pods, with no rollout.
func TestKubernetesConfigMapReload(t *testing.T) {
	objs := k8sObjects(t)
	var d deployment
	findObject(t, objs, "Deployment", "surgepay", &d)
	c := containerNamed(t, d.Spec.Template.Spec.Containers, "surgepay")
	m := mountConfigMap(t, objs, &d, c)

	ctx, cancel := context.WithCancel(context.Background())
	hup, reloads, done := make(chan os.Signal, 1), make(chan string, 8), make(chan struct{})
	go func() {
		defer close(done)
		config.Watch(ctx, m.file(), hup, func(why string) {
			select {
			case reloads <- why:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	wait := func(want string) {
		t.Helper()
		select {
		case why := <-reloads:
			if why != want {
				t.Fatalf("config.Watch reloaded for %q, want %q", why, want)
			}
		case <-time.After(reloadWait):
			t.Fatalf("config.Watch: no reload for %q within %s", want, reloadWait)
		}
	}
	// A signal first: its reload shows that Watch has read the file's
	// modification time, so the update below is a change to it.
	hup <- os.Interrupt
	wait("SIGHUP")

	const merchant, rate = "mer_deploytest", 7.5
	m.files[m.path] += fmt.Sprintf("\n[merchants.%q]\nrate_limit = %v\n", merchant, rate)
	start := time.Now()
	kubeletWrite(t, m)
	wait("file changed")
	t.Logf("the ConfigMap's update seen by config.Watch after %s", time.Since(start).Round(time.Millisecond))
	cfg, err := config.Load(m.file(), mapEnv(kubernetesEnv(t, c)))
	if err != nil {
		t.Fatalf("the updated ConfigMap's %s does not load: %v", m.path, err)
	}
	if got := cfg.Merchants[merchant].RateLimit; got != rate {
		t.Errorf("after the update, merchants.%s.rate_limit = %v, want %v", merchant, got, rate)
	}
}

// mapEnv is an environment for config.Load: only the variables given.
func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// checkServeConfig checks what serve needs on several nodes behind a
// proxy, in a container: PostgreSQL, the JetStream stage, the shared
// Redis, a shutdown delay, and listeners it accepts on 0.0.0.0.
func checkServeConfig(t *testing.T, where string, cfg config.Config) {
	t.Helper()
	if cfg.Storage != "postgres" {
		t.Errorf("%s: storage %q, want postgres (several nodes share one database)", where, cfg.Storage)
	}
	if cfg.Postgres.DSN == "" {
		t.Errorf("%s: no postgres.dsn", where)
	}
	if cfg.Stage.Kind != "jetstream" || cfg.Stage.NATSURL == "" {
		t.Errorf("%s: stage %q at %q, want jetstream with a NATS URL", where, cfg.Stage.Kind, cfg.Stage.NATSURL)
	}
	if len(cfg.Cache.Redis.GlobalAddrs) == 0 {
		t.Errorf("%s: no cache.redis.global_addrs", where)
	}
	for name, e := range cfg.Cache.Entities {
		// Idempotency records stay in each process: a retry on another
		// node reads its answer from PostgreSQL, the SELECT every new key
		// costs anyway, and through Redis they cost a round trip and a
		// write a sale (docs/cache.md).
		want := "global"
		if name == "idempotency" {
			want = "process"
		}
		if _, retired := cache.RetiredEntities[name]; !retired && string(e.Scope) != want {
			t.Errorf("%s: cache entity %s has scope %q, want %s", where, name, e.Scope, want)
		}
	}
	if cfg.ShutdownDelay.Duration <= 0 {
		t.Errorf("%s: shutdown_delay is 0: behind a load balancer, requests would be refused while it still sends them", where)
	}
	for _, l := range []struct{ setting, addr string }{{"listen", cfg.Listen}, {"admin_listen", cfg.AdminListen}} {
		if host, _, _ := net.SplitHostPort(l.addr); host != "0.0.0.0" {
			t.Errorf("%s: %s %q: in a container, listen on 0.0.0.0", where, l.setting, l.addr)
		}
		if err := tlsconfig.CheckPlainListen(cfg.TLS, l.setting, l.addr); err != nil {
			t.Errorf("%s: serve would refuse to start: %v", where, err)
		}
	}
}

// -------------------------------------------------------------- Docker

type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

type dockerInstr struct{ cmd, args string }

// dockerfile parses deploy/docker/Dockerfile into stages: instructions
// with their continuation lines joined, comments dropped.
func dockerfile(t *testing.T) []dockerStage {
	t.Helper()
	f, err := os.Open("docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []dockerStage
	var global []dockerInstr
	sc := bufio.NewScanner(f)
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			st := dockerStage{}
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					st.name = fields[i+1]
					i++
				case st.from == "":
					st.from = fields[i]
				}
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			global = append(global, in)
			return
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	if len(stages) < 2 {
		t.Fatalf("deploy/docker/Dockerfile: %d stages, want a build stage and a final one", len(stages))
	}
	// The global ARGs (before the first FROM), for the FROM lines.
	stages[0].instrs = append(global, stages[0].instrs...)
	return stages
}

func (s dockerStage) all(cmd string) []string {
	var out []string
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// envPairs reads an ENV instruction's KEY=VALUE pairs.
func envPairs(args string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(args) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// dockerfileEnv returns the environment the final stage sets.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	stages := dockerfile(t)
	env := map[string]string{}
	for _, e := range stages[len(stages)-1].all("ENV") {
		maps.Copy(env, envPairs(e))
	}
	return env
}

// TestDockerfile checks deploy/docker/Dockerfile: a static build with the
// release's flags, a final stage that runs serve as a non-root user on
// 0.0.0.0 with its ports exposed and its data on a volume. It cannot be
// built here (no Docker in CI).
func TestDockerfile(t *testing.T) {
	stages := dockerfile(t)
	build, final := stages[0], stages[len(stages)-1]

	// The build stage: Go of go.mod's version, CGO off, -trimpath, PGO
	// and the version ldflags that .goreleaser.yaml sets.
	goVersion := goModVersion(t)
	from := build.from
	for _, a := range build.all("ARG") {
		if k, v, ok := strings.Cut(a, "="); ok {
			from = strings.ReplaceAll(from, "${"+k+"}", strings.Trim(v, `"`))
		}
	}
	if from != "golang:"+goVersion && !strings.HasPrefix(from, "golang:"+goVersion+".") && !strings.HasPrefix(from, "golang:"+goVersion+"-") {
		t.Errorf("build stage FROM %s: want golang:%s (go.mod's go line)", from, goVersion)
	}
	var goBuild string
	for _, r := range build.all("RUN") {
		if strings.Contains(r, "go build") {
			goBuild = r
		}
	}
	if goBuild == "" {
		t.Fatal("build stage: no RUN go build")
	}
	// CGO_ENABLED=0 in the stage's ENV (the last one wins), or on the go
	// build command itself.
	cgoOff := regexp.MustCompile(`CGO_ENABLED=0\s+(\S+=\S*\s+)*go build`).MatchString(goBuild)
	for _, e := range build.all("ENV") {
		if v, ok := envPairs(e)["CGO_ENABLED"]; ok {
			cgoOff = v == "0"
		}
	}
	if !cgoOff {
		t.Error("build stage: CGO_ENABLED=0 is not set (a static binary for distroless/static)")
	}
	for _, flag := range []string{"-trimpath", "-pgo=cmd/surgepay/default.pgo", "./cmd/surgepay"} {
		if !strings.Contains(goBuild, flag) {
			t.Errorf("build stage: go build lacks %s", flag)
		}
	}
	if _, err := os.Stat("../cmd/surgepay/default.pgo"); err != nil {
		t.Error(err)
	}
	// Every -X the release sets, and the variables version.go declares.
	releaser, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	versionGo, err := os.ReadFile("../cmd/surgepay/version.go")
	if err != nil {
		t.Fatal(err)
	}
	xs := regexp.MustCompile(`-X (main\.\w+)=`).FindAllStringSubmatch(string(releaser), -1)
	if len(xs) < 3 {
		t.Fatalf(".goreleaser.yaml: %d -X ldflags, want version, commit and date", len(xs))
	}
	for _, x := range xs {
		if !strings.Contains(goBuild, "-X "+x[1]+"=") {
			t.Errorf("build stage: go build does not set %s (.goreleaser.yaml does)", x[1])
		}
		name := strings.TrimPrefix(x[1], "main.")
		if !regexp.MustCompile(`\b` + name + `\s+string\b`).Match(versionGo) {
			t.Errorf("cmd/surgepay/version.go declares no string %s for -X %s", name, x[1])
		}
	}

	// The final stage.
	users := final.all("USER")
	if len(users) == 0 {
		t.Fatal("final stage: no USER")
	}
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("final stage: USER %q, want a numeric user other than root (Kubernetes' runAsNonRoot checks a number)", users[len(users)-1])
	}
	if !strings.Contains(final.from, "distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s: want distroless/static or scratch (no shell, no libc: the binary is static)", final.from)
	}
	if got := final.all("ENTRYPOINT"); len(got) != 1 || !jsonArgs(t, got[0], "/surgepay") {
		t.Errorf(`final stage: ENTRYPOINT %s, want one: ["/surgepay"]`, strings.Join(got, "; "))
	}
	if got := final.all("CMD"); len(got) != 1 || !jsonArgs(t, got[0], "serve") {
		t.Errorf(`final stage: CMD %s, want one: ["serve"]`, strings.Join(got, "; "))
	}
	// The image has no shell nor curl: its HEALTHCHECK is the binary's own.
	if got := final.all("HEALTHCHECK"); len(got) != 1 || !strings.Contains(got[0], `CMD ["/surgepay", "healthcheck"`) {
		t.Errorf(`final stage: HEALTHCHECK %s, want one running ["/surgepay", "healthcheck", ...]`, strings.Join(got, "; "))
	}
	copied := false
	for _, c := range final.all("COPY") {
		copied = copied || (strings.Contains(c, "--from="+build.name) && strings.HasSuffix(c, " /surgepay"))
	}
	if !copied {
		t.Errorf("final stage: no COPY --from=%s of the binary to /surgepay", build.name)
	}
	env := dockerfileEnv(t)
	var exposed []string
	for _, e := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(e)...)
	}
	for _, k := range []string{"SURGEPAY_LISTEN", "SURGEPAY_ADMIN_LISTEN"} {
		host, port, err := net.SplitHostPort(env[k])
		if err != nil || host != "0.0.0.0" {
			t.Errorf("final stage: ENV %s=%q, want 0.0.0.0:PORT", k, env[k])
			continue
		}
		if !slices.Contains(exposed, port) {
			t.Errorf("final stage: %s's port %s is not EXPOSEd (%v)", k, port, exposed)
		}
	}
	volumes := strings.Join(final.all("VOLUME"), " ")
	if env["SURGEPAY_DATA_DIR"] == "" || !strings.Contains(volumes, `"`+env["SURGEPAY_DATA_DIR"]+`"`) {
		t.Errorf("final stage: the data folder SURGEPAY_DATA_DIR=%q is not a VOLUME (%s)", env["SURGEPAY_DATA_DIR"], volumes)
	}
	checkDockerignore(t)
}

func jsonArgs(t *testing.T, s string, want ...string) bool {
	t.Helper()
	var got []string
	if err := json.Unmarshal([]byte(s), &got); err != nil {
		return false
	}
	return slices.Equal(got, want)
}

// jsonArgsPrefix reports whether args starts with want.
func jsonArgsPrefix(args []string, want ...string) bool {
	return len(args) >= len(want) && slices.Equal(args[:len(want)], want)
}

// goModVersion returns go.mod's go line as major.minor (1.26).
func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod: no go line")
	}
	return string(m[1])
}

// checkDockerignore checks that deploy/docker/Dockerfile.dockerignore
// leaves in every file the build needs: go.mod, go.sum, the profile, and
// the Go and embedded files of every package of this module that
// cmd/surgepay imports (go list).
func checkDockerignore(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("docker/Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, "!") {
				t.Fatalf("Dockerfile.dockerignore: %s: this check knows no exceptions (!)", l)
			}
			patterns = append(patterns, strings.TrimPrefix(l, "/"))
		}
	}
	needed := []string{"go.mod", "go.sum", "cmd/surgepay/default.pgo"}
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but go is not on the PATH: the files the build needs cannot be listed")
		}
		t.Skip("go not on the PATH: the files the build needs are not listed")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", "./cmd/surgepay")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                 string
			GoFiles, EmbedFiles []string
			Module              *struct{ Path string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "github.com/surgepay/surgepay" {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range slices.Concat(p.GoFiles, p.EmbedFiles) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 50 {
		t.Fatalf("go list found %d files the build needs; expected many more", len(needed))
	}
	for _, f := range needed {
		for _, p := range patterns {
			if ignored(p, f) {
				t.Errorf("Dockerfile.dockerignore: %q leaves out %s, which the build needs", p, f)
			}
		}
	}
	// And it does keep out what must not go to the builder.
	for _, f := range []string{".git/config", "surgepay", "data/keyring.json"} {
		if !slices.ContainsFunc(patterns, func(p string) bool { return ignored(p, f) }) {
			t.Errorf("Dockerfile.dockerignore: %s is sent to the builder", f)
		}
	}
}

// ignored reports whether a .dockerignore pattern (no exceptions) leaves
// out the file f (slash-separated, relative to the context): the pattern
// matches f or one of its parent folders; **/ matches any depth.
func ignored(pattern, f string) bool {
	parts := strings.Split(f, "/")
	for i := 1; i <= len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
		if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
			for j := range i {
				if ok, _ := path.Match(rest, strings.Join(parts[j:i], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// ------------------------------------------------------------- Compose

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command         []string          `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Healthcheck     *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Volumes []string `yaml:"volumes"`
	Configs []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"configs"`
	Ports    []string `yaml:"ports"`
	ReadOnly bool     `yaml:"read_only"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Configs  map[string]struct {
		File    string `yaml:"file"`
		Content string `yaml:"content"`
	} `yaml:"configs"`
	Volumes map[string]any `yaml:"volumes"`
}

var composeVarRE = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate replaces compose's ${VAR}, ${VAR:-default}, ${VAR:?error}
// and $$ as docker compose does, from vars.
func interpolate(s string, vars map[string]string) (string, error) {
	var errs []error
	out := composeVarRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := composeVarRE.FindStringSubmatch(m)
		name, op, arg := sub[1], sub[2], sub[3]
		if name == "" {
			name = sub[4]
		}
		v, set := vars[name]
		switch op {
		case ":-":
			if v == "" {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":?", "?":
			if v == "" {
				errs = append(errs, fmt.Errorf("required variable %s is empty: %s", name, arg))
			}
		case ":+", "+":
			if v != "" || (op == "+" && set) {
				return arg
			}
			return ""
		}
		return v
	})
	return out, errors.Join(errs...)
}

// requiredVars returns the variables compose.yaml requires (${VAR:?...}).
func requiredVars(s string) []string {
	var out []string
	for _, m := range composeVarRE.FindAllStringSubmatch(s, -1) {
		if (m[2] == ":?" || m[2] == "?") && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

// envExample reads compose/.env.example's variables (KEY= lines).
func envExample(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("compose/.env.example")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keys = append(keys, strings.TrimSpace(k))
		}
	}
	slices.Sort(keys)
	return keys
}

// composeStubs stubs every .env.example variable, as a filled .env would.
func composeStubs(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, k := range envExample(t) {
		vars[k] = "stub0123456789abcdef" + strings.ToLower(strings.ReplaceAll(k, "_", ""))
	}
	return vars
}

func loadCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	docs := yamlDocs(t, "compose/compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents, want 1", len(docs))
	}
	var cf composeFile
	decodeNode(t, "compose/compose.yaml", docs[0], &cf)
	raw, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cf, string(raw)
}

// secretLike names the variables that must come from .env, never be
// written in compose.yaml.
var secretLike = regexp.MustCompile(`PASSWORD|TOKEN|KEYRING|DSN|PRIVATE_KEY|SECRET|REDISCLI_AUTH`)

// TestCompose checks deploy/compose: the services, their healthchecks
// where something waits for them, secrets from .env, the HAProxy
// configuration's nodes and timing, and surgepay.toml through surgepay's
// configuration loader.
func TestCompose(t *testing.T) {
	cf, raw := loadCompose(t)
	nodes := []string{"surgepay-1", "surgepay-2", "surgepay-3"}
	for _, name := range slices.Concat([]string{"postgres", "redis", "nats", "simulator", "settle", "haproxy"}, nodes) {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("compose.yaml: no service %s", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for name, s := range cf.Services {
		if s.Image == "" {
			t.Errorf("service %s: no image", name)
		} else if !strings.Contains(s.Image, "${") {
			checkImage(t, "service "+name, s.Image)
		}
		for dep, d := range s.DependsOn {
			target, ok := cf.Services[dep]
			if !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
				continue
			}
			switch d.Condition {
			case "service_healthy":
				if target.Healthcheck == nil || target.Healthcheck.Disable || len(target.Healthcheck.Test) == 0 {
					t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			case "service_started", "service_completed_successfully":
			default:
				t.Errorf("service %s: depends_on %s: condition %q", name, dep, d.Condition)
			}
		}
		for k, v := range s.Environment {
			if secretLike.MatchString(k) && !strings.Contains(v, "${") {
				t.Errorf("service %s: %s is written in compose.yaml; take it from .env (${...})", name, k)
			}
		}
		for _, c := range s.Configs {
			def, ok := cf.Configs[c.Source]
			if !ok {
				t.Errorf("service %s: config %s is not defined", name, c.Source)
			}
			// Compose copies a config without a file into the container
			// when it creates it, which a read-only root filesystem
			// refuses (compose 2.33.1 and later refuse the service: "`file`
			// is the sole supported option"; earlier, the daemon:
			// "container rootfs is marked read-only").
			if ok && s.ReadOnly && def.File == "" {
				t.Errorf("service %s: config %s has no file, which compose refuses in a read_only service", name, c.Source)
			}
		}
	}
	for name, c := range cf.Configs {
		if c.File != "" {
			if _, err := os.Stat(filepath.Join("compose", c.File)); err != nil {
				t.Errorf("config %s: %v", name, err)
			}
		}
		for _, l := range strings.Split(c.Content, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), " "); ok && regexp.MustCompile(`(?i)pass`).MatchString(k) && !strings.Contains(v, "${") {
				t.Errorf("config %s: %q is written in compose.yaml; take it from .env (${...})", name, l)
			}
		}
	}

	// The image's HEALTHCHECK asks a serve: the nodes run it, the other
	// services of the image (no serve in them) turn it off.
	for name, s := range cf.Services {
		switch {
		case slices.Contains(nodes, name):
			if s.Healthcheck == nil || s.Healthcheck.Disable || !jsonArgsPrefix(s.Healthcheck.Test, "CMD", "/surgepay", "healthcheck") {
				t.Errorf("service %s: healthcheck %+v, want [CMD /surgepay healthcheck ...]", name, s.Healthcheck)
			}
		case strings.Contains(s.Image, "SURGEPAY_IMAGE") && (s.Healthcheck == nil || !s.Healthcheck.Disable):
			t.Errorf("service %s runs the surgepay image without serve: want healthcheck: disable: true", name)
		}
	}

	// The dependencies: healthchecks, PostgreSQL's data on a named
	// volume, NATS with JetStream.
	pg := cf.Services["postgres"]
	if pg.Healthcheck == nil || !strings.Contains(strings.Join(pg.Healthcheck.Test, " "), "pg_isready") {
		t.Error("service postgres: no pg_isready healthcheck")
	}
	namedVolume := false
	for _, v := range pg.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		_, declared := cf.Volumes[src]
		namedVolume = namedVolume || (declared && strings.HasPrefix(dst, "/var/lib/postgresql"))
	}
	if !namedVolume {
		t.Errorf("service postgres: its data is not on a named volume (%v)", pg.Volumes)
	}
	natsArgs := strings.Join(cf.Services["nats"].Command, " ")
	if !strings.Contains(" "+natsArgs+" ", " -js ") && !strings.Contains(natsArgs, "--jetstream") {
		t.Errorf("service nats: %q does not turn JetStream on (-js)", natsArgs)
	}

	// Secrets: every variable compose.yaml requires is in .env.example,
	// and .env.example holds nothing compose.yaml does not use.
	required, example := requiredVars(raw), envExample(t)
	for _, v := range required {
		if !slices.Contains(example, v) {
			t.Errorf(".env.example lacks %s, which compose.yaml requires", v)
		}
	}
	for _, v := range example {
		if !strings.Contains(raw, "${"+v) {
			t.Errorf(".env.example has %s, which compose.yaml never reads", v)
		}
	}
	vars := composeStubs(t)

	// The nodes: the image built from deploy/docker/Dockerfile with the
	// repository as context, and surgepay.toml as each node sees it.
	inter, fall := haproxyTiming(t)
	var cfg config.Config
	for _, name := range nodes {
		s := cf.Services[name]
		if s.Build == nil || filepath.Join("compose", s.Build.Context, s.Build.Dockerfile) != filepath.Join("..", "deploy", "docker", "Dockerfile") {
			t.Errorf("service %s: not built from deploy/docker/Dockerfile with the repository as context", name)
		} else if _, err := os.Stat(filepath.Join("compose", s.Build.Context, "go.mod")); err != nil {
			t.Errorf("service %s: build context %s is not the repository's root", name, s.Build.Context)
		}
		if !slices.Equal(s.Command, []string{"serve"}) {
			t.Errorf("service %s: command %v, want [serve]", name, s.Command)
		}
		if !s.ReadOnly {
			t.Errorf("service %s: read_only is not true", name)
		}
		cfg = composeConfig(t, cf, name, vars)
		checkServeConfig(t, "compose "+name, cfg)
		// Redis's password: .env's, by the environment (the file holds
		// no secret: composeConfig checks).
		if v := s.Environment["SURGEPAY_REDIS_PASSWORD"]; !strings.HasPrefix(v, "${REDIS_PASSWORD:") {
			t.Errorf("service %s: SURGEPAY_REDIS_PASSWORD is %q, want .env's REDIS_PASSWORD (${REDIS_PASSWORD:?...})", name, v)
		}
		if cfg.Cache.Redis.Password.Reveal() != vars["REDIS_PASSWORD"] {
			t.Errorf("service %s: cache.redis.password as loaded is not .env's REDIS_PASSWORD", name)
		}
		if want := inter*time.Duration(fall) + time.Second; cfg.ShutdownDelay.Duration != want {
			t.Errorf("compose surgepay.toml: shutdown_delay %s, want HAProxy's inter %s x fall %d + 1s = %s",
				cfg.ShutdownDelay.Duration, inter, fall, want)
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if need := cfg.ShutdownDelay.Duration + cfg.DrainTimeout.Duration + cfg.Webhooks.Timeout.Duration; err != nil || grace <= need {
			t.Errorf("service %s: stop_grace_period %q is not above shutdown_delay + %s drain + webhooks.timeout = %s (Docker's default is 10s)",
				name, s.StopGracePeriod, cfg.DrainTimeout.Duration, need)
		}
	}
	// settle reads the same file, in the same way (it watches it too).
	composeConfig(t, cf, "settle", vars)
	// NATS refuses a stream larger than its file store: the stage's
	// max_bytes must fit in nats.conf's max_file_store.
	if store := natsFileStore(t, cf.Configs["nats.conf"].Content); cfg.Stage.MaxBytes == 0 || cfg.Stage.MaxBytes > store {
		t.Errorf("compose: stage.max_bytes %d does not fit in nats.conf's max_file_store (%d bytes)",
			cfg.Stage.MaxBytes, store)
	}
	// HAProxy: one server per node, on the API's port, checked on the
	// admin listener's /readyz; a POST never retried.
	checkHAProxy(t, nodes, cfg)
}

// composeConfig loads the surgepay.toml that service name reads (its
// SURGEPAY_CONFIG) from the folder compose bind-mounts there, with the
// service's environment (interpolated from vars) over the image's. The
// file must reach the container by a bind-mounted folder: a `content`
// config is copied in when compose creates the container, and a
// bind-mounted file keeps showing the old file once a save replaces it
// (sed -i, most editors), so neither shows a running node a change.
func composeConfig(t *testing.T, cf composeFile, name string, vars map[string]string) config.Config {
	t.Helper()
	s := cf.Services[name]
	env := dockerfileEnv(t)
	for k, v := range s.Environment {
		iv, err := interpolate(v, vars)
		if err != nil {
			t.Fatalf("service %s: %s: %v", name, k, err)
		}
		env[k] = iv
	}
	file := env["SURGEPAY_CONFIG"]
	if file == "" {
		t.Fatalf("service %s: no SURGEPAY_CONFIG", name)
	}
	for _, c := range s.Configs {
		if c.Target == file {
			t.Fatalf("service %s: %s is config %s, which compose copies into the container when it creates it: a change never reaches a running node (bind-mount its folder)",
				name, file, c.Source)
		}
	}
	var src, dst, mode string
	for _, v := range s.Volumes {
		f := strings.Split(v, ":")
		if len(f) < 2 || (!strings.HasPrefix(f[0], ".") && !strings.HasPrefix(f[0], "/")) {
			continue // a named volume
		}
		if f[1] == file {
			t.Fatalf("service %s: %s is a bind-mounted file, which keeps showing the old file once a save replaces it: bind-mount its folder", name, file)
		}
		if strings.HasPrefix(file, strings.TrimSuffix(f[1], "/")+"/") && len(f[1]) > len(dst) {
			src, dst, mode = f[0], strings.TrimSuffix(f[1], "/"), strings.Join(f[2:], ":")
		}
	}
	if dst == "" {
		t.Fatalf("service %s: SURGEPAY_CONFIG %s is in no folder bind-mounted from deploy/compose", name, file)
	}
	if !slices.Contains(strings.Split(mode, ","), "ro") {
		t.Errorf("service %s: %s:%s is not mounted read-only (:ro)", name, src, dst)
	}
	host := filepath.Join("compose", filepath.FromSlash(src))
	if st, err := os.Stat(host); err != nil || !st.IsDir() {
		t.Fatalf("service %s: %s, bind-mounted at %s, is not a folder of deploy/compose (%v)", name, src, dst, err)
	}
	hostFile := filepath.Join(host, filepath.FromSlash(strings.TrimPrefix(file, dst+"/")))
	b, err := os.ReadFile(hostFile)
	if err != nil {
		t.Fatalf("service %s: %v", name, err)
	}
	if strings.Contains(string(b), "${") {
		t.Errorf("%s holds ${...}, which compose does not replace in a bind-mounted file: serve would read it as written", hostFile)
	}
	checkNoSecrets(t, hostFile, string(b))
	cfg, err := config.Load(hostFile, mapEnv(env))
	if err != nil {
		t.Fatalf("%s does not load for %s: %v", hostFile, name, err)
	}
	return cfg
}

// natsFileStore reads max_file_store from a nats-server configuration:
// bytes, or a size with K, M, G or T (and an optional B), powers of 1024
// as nats-server reads them.
func natsFileStore(t *testing.T, conf string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*max_file_store\s*[:=]\s*(\d+)\s*([KMGT]?)B?\s*$`).FindStringSubmatch(conf)
	if m == nil {
		t.Fatal("nats.conf: no max_file_store (without one NATS takes most of the disk)")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	shift := 0
	if m[2] != "" {
		shift = 10 * (strings.Index("KMGT", m[2]) + 1)
	}
	return n << shift
}

// haproxyCfg returns compose/haproxy.cfg's lines, comments dropped.
func haproxyCfg(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("compose/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l, _, _ = strings.Cut(l, "#"); strings.TrimSpace(l) != "" {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return out
}

// haproxyTiming returns the health checks' inter and fall of the
// surgepay backend's default-server line.
func haproxyTiming(t *testing.T) (time.Duration, int) {
	t.Helper()
	var inter time.Duration
	fall := 0
	for _, l := range haproxyCfg(t) {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "default-server" {
			continue
		}
		for i := 1; i+1 < len(f); i++ {
			switch f[i] {
			case "inter":
				v := f[i+1]
				if _, err := strconv.Atoi(v); err == nil {
					v += "ms" // HAProxy's unit-less times are milliseconds
				}
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("haproxy.cfg: inter %q: %v", f[i+1], err)
				}
				inter = d
			case "fall":
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					t.Fatalf("haproxy.cfg: fall %q: %v", f[i+1], err)
				}
				fall = n
			}
		}
	}
	if inter == 0 || fall == 0 {
		t.Fatalf("haproxy.cfg: no default-server line with inter and fall (got %s, %d)", inter, fall)
	}
	return inter, fall
}

func checkHAProxy(t *testing.T, nodes []string, cfg config.Config) {
	t.Helper()
	lines := haproxyCfg(t)
	has := func(want string) bool { return slices.Contains(lines, want) }
	apiPort, adminPort := listenPort(t, cfg.Listen), listenPort(t, cfg.AdminListen)
	var servers []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "server" {
			servers = append(servers, f[1])
			if want := fmt.Sprintf("%s:%d", f[1], apiPort); f[2] != want {
				t.Errorf("haproxy.cfg: server %s at %s, want %s (the node's API)", f[1], f[2], want)
			}
			if !strings.Contains(l, fmt.Sprintf(" check port %d", adminPort)) {
				t.Errorf("haproxy.cfg: server %s is not checked on the admin port %d: %q", f[1], adminPort, l)
			}
		}
	}
	if !slices.Equal(servers, nodes) {
		t.Errorf("haproxy.cfg: servers %v, want the compose nodes %v", servers, nodes)
	}
	for _, want := range []string{
		"option httpchk",
		"http-check expect status 200",
		"option http-keep-alive",
		// A POST is never retried on another node.
		"http-request disable-l7-retry unless { method GET HEAD OPTIONS }",
	} {
		if !has(want) {
			t.Errorf("haproxy.cfg: no line %q", want)
		}
	}
	check := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "http-check send ") })
	if check < 0 || !strings.Contains(lines[check], "meth GET uri /readyz ") {
		t.Error("haproxy.cfg: the health check does not GET /readyz")
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "option http-server-close") || strings.HasPrefix(l, "option httpclose") {
			t.Errorf("haproxy.cfg: %q closes connections that keep-alive would reuse", l)
		}
	}
}

// TestHAProxyCheck runs `haproxy -c` on compose/haproxy.cfg. Without
// haproxy the test is skipped, unless CI is set: then it fails.
func TestHAProxyCheck(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/haproxy"); serr == nil {
			bin = "/usr/sbin/haproxy"
		} else if os.Getenv("CI") != "" {
			t.Fatal("CI is set but haproxy is not installed (apt-get install haproxy)")
		} else {
			t.Skip("haproxy not installed")
		}
	}
	out, err := exec.Command(bin, "-c", "-f", "compose/haproxy.cfg").CombinedOutput()
	if err != nil {
		t.Fatalf("haproxy -c -f deploy/compose/haproxy.cfg: %v\n%s", err, out)
	}
	// Warnings other than the nodes' names, which only Docker's DNS
	// resolves, are mistakes to fix.
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "[WARNING]") && !strings.Contains(l, "could not resolve address 'surgepay-") {
			t.Errorf("haproxy -c: %s", l)
		}
	}
}
