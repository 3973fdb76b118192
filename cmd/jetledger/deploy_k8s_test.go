package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/service"
	"go.yaml.in/yaml/v3"
)

// k8sObject is one document of a manifest, as decoded.
type k8sObject map[string]any

// readManifest decodes every document of a multi-document YAML file.
func readManifest(t *testing.T, path string) []k8sObject {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []k8sObject
	dec := yaml.NewDecoder(f)
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, o)
	}
}

// at walks o by keys (string: a map's, int: a list's index); nil where
// the path leads nowhere.
func at(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			if m == nil {
				if km, ok := o.(k8sObject); ok {
					m = km
				}
			}
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func str(o any, path ...any) string { s, _ := at(o, path...).(string); return s }

func list(o any, path ...any) []any { l, _ := at(o, path...).([]any); return l }

// find is the object of kind and name.
func find(t *testing.T, objs []k8sObject, kind, name string) k8sObject {
	t.Helper()
	for _, o := range objs {
		if str(o, "kind") == kind && str(o, "metadata", "name") == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the manifest", kind, name)
	return nil
}

// mountOf is the volume (its spec) mounted at the directory holding path,
// or nil.
func mountOf(pod, container any, path string) (string, any) {
	for _, m := range list(container, "volumeMounts") {
		if under(path, str(m, "mountPath")) {
			name := str(m, "name")
			for _, v := range list(pod, "volumes") {
				if str(v, "name") == name {
					return name, v
				}
			}
			return name, nil
		}
	}
	return "", nil
}

// deploy/k8s: the group's StatefulSet runs a command the CLI takes and
// checks (nothing is started) with the group flags, its files on the
// volumes they need, probes on /healthz of --metrics, a grace period
// for the hand-over, and NATS's pods the --nats URLs name.
func TestDeployKubernetesGroup(t *testing.T) {
	clearEnvironment(t)
	objs := readManifest(t, filepath.Join(deployDir, "k8s", "jetledger.yaml"))
	set := find(t, objs, "StatefulSet", "jetledger")
	pod := at(set, "spec", "template", "spec")
	c := at(pod, "containers", 0)
	var args []string
	for _, a := range list(c, "args") {
		args = append(args, fmt.Sprint(a))
	}
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("the container's args %q: want run and its flags", args)
	}
	// The secret's and the schema's files are the pod's: checked on their
	// volumes, and read here from files of the test's.
	for i, a := range args {
		if file, ok := strings.CutPrefix(a, "--schema="); ok {
			_, v := mountOf(pod, c, file)
			cm := find(t, objs, "ConfigMap", str(v, "configMap", "name"))
			local := filepath.Join(t.TempDir(), filepath.Base(file))
			if err := os.WriteFile(local, []byte(str(cm, "data", filepath.Base(file))), 0o600); err != nil {
				t.Fatal(err)
			}
			args[i] = "--schema=" + local
		}
		if file, ok := strings.CutPrefix(a, "--nats-token-file="); ok {
			if _, v := mountOf(pod, c, file); str(v, "secret", "secretName") == "" {
				t.Errorf("--nats-token-file %s: on no secret's volume", file)
			}
			local := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(local, []byte("s3cret"), 0o600); err != nil {
				t.Fatal(err)
			}
			args[i] = "--nats-token-file=" + local
		}
	}
	r, err := parseRun(t, args)
	if err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	if _, err := r.prepare(); err != nil {
		t.Errorf("args %q: %v", args, err)
	}
	if r.Group == "" || r.Standbys < 1 || r.Partitions < 2 {
		t.Errorf("--group %q --standbys %d --partitions %d: want a group keeping a standby of each of its partitions", r.Group, r.Standbys, r.Partitions)
	}
	checkK8sVolumes(t, set, pod, c, r)
	checkK8sProbes(t, c, r)
	drain, err := drainBound(r)
	if err != nil {
		t.Fatal(err)
	}
	grace, _ := at(pod, "terminationGracePeriodSeconds").(int)
	if need := service.HandOverDefault + drain + stopMargin; time.Duration(grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %d: a member hands its partitions over (%v) and drains (%v) before it exits: want %v or more",
			grace, service.HandOverDefault, drain, need)
	}
	if uid, _ := at(pod, "securityContext", "runAsUser").(int); uid != 65532 {
		t.Errorf("runAsUser %d: want the Containerfile's USER, 65532", uid)
	}
	checkK8sNATS(t, objs, r)
}

// checkK8sVolumes: --db on a volume of the StatefulSet's claims (a pod's
// ledgers outlive it).
func checkK8sVolumes(t *testing.T, set, pod, c any, r *runCmd) {
	t.Helper()
	name, _ := mountOf(pod, c, r.DB)
	claimed := slices.ContainsFunc(list(set, "spec", "volumeClaimTemplates"), func(v any) bool { return str(v, "metadata", "name") == name })
	if name == "" || !claimed {
		t.Errorf("--db %s: on no volume of the StatefulSet's volumeClaimTemplates (mounted: %q)", r.DB, name)
	}
}

// checkK8sProbes: readiness and liveness ask /healthz of --metrics, which
// listens beyond loopback (a probe comes from the node).
func checkK8sProbes(t *testing.T, c any, r *runCmd) {
	t.Helper()
	host, port, err := net.SplitHostPort(r.Metrics)
	if err != nil || host == "127.0.0.1" || host == "localhost" {
		t.Fatalf("--metrics %q: want an address a probe reaches (0.0.0.0:PORT)", r.Metrics)
	}
	named := map[string]string{}
	for _, p := range list(c, "ports") {
		named[str(p, "name")] = fmt.Sprint(at(p, "containerPort"))
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		p := at(c, probe, "httpGet", "port")
		got := fmt.Sprint(p)
		if n, ok := named[got]; ok {
			got = n
		}
		if str(c, probe, "httpGet", "path") != "/healthz" || got != port {
			t.Errorf("%s: %v on port %s, want /healthz on --metrics' %s", probe, at(c, probe, "httpGet", "path"), got, port)
		}
	}
}

// checkK8sNATS: the --nats URLs name the NATS StatefulSet's pods, whose
// configuration routes to each of them.
func checkK8sNATS(t *testing.T, objs []k8sObject, r *runCmd) {
	t.Helper()
	nats := find(t, objs, "StatefulSet", "nats")
	n, _ := at(nats, "spec", "replicas").(int)
	conf := str(find(t, objs, "ConfigMap", "nats-config"), "data", "nats.conf")
	for i := range n {
		pod := fmt.Sprintf("nats-%d.%s", i, str(nats, "spec", "serviceName"))
		if !strings.Contains(r.NATS.URL, "nats://"+pod+":4222") {
			t.Errorf("--nats %s does not name NATS pod %s", r.NATS.URL, pod)
		}
		if !strings.Contains(conf, "nats-route://"+pod+":6222") {
			t.Errorf("the NATS configuration does not route to %s", pod)
		}
	}
	if n < 3 || r.Replicas != n {
		t.Errorf("NATS has %d replicas and run --replicas %d: want 3 or more, and the streams on every node", n, r.Replicas)
	}
}
