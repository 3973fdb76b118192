package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer/consumertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"
)

// deploy/nats/cluster.conf, started three times on loopback (its hosts
// n1-n3 and ports moved to the test's, nothing else changed), forms a
// cluster whose JetStream takes a stream of 3 replicas, for clients with
// the token only.
func TestDeployNATSClusterConfigFormsACluster(t *testing.T) {
	t.Parallel()
	conf, err := os.ReadFile("../deploy/nats/cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	bin, dir := natsServerBinary(t), t.TempDir()
	ports, routes := map[string]int{}, map[string]int{}
	names := []string{"n1", "n2", "n3"}
	for _, n := range names {
		ports[n], routes[n] = freePort(t), freePort(t)
	}
	for _, n := range names {
		r := []string{"0.0.0.0:4222", fmt.Sprintf("127.0.0.1:%d", ports[n]), "0.0.0.0:6222", fmt.Sprintf("127.0.0.1:%d", routes[n]),
			"127.0.0.1:8222", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "/var/lib/nats", filepath.Join(dir, n)}
		for _, m := range names {
			r = append(r, "nats-route://"+m+":6222", fmt.Sprintf("nats-route://127.0.0.1:%d", routes[m]))
		}
		path := filepath.Join(dir, n+".conf")
		if err := os.WriteFile(path, []byte(strings.NewReplacer(r...).Replace(string(conf))), 0o600); err != nil {
			t.Fatal(err)
		}
		startBinary(t, bin, []string{"NATS_NAME=" + n, "NATS_TOKEN=tok"}, "-c", path)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d,nats://127.0.0.1:%d", ports["n1"], ports["n2"], ports["n3"])
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without the token was let in")
	}
	nc, err := nats.Connect(url, nats.Token("tok"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	consumertest.Eventually(t, 2*time.Minute, "a stream of 3 replicas on the cluster", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.>"}, Replicas: 3})
		return err == nil
	})
}

// The NATS configuration of deploy/k8s/jetledger.yaml is one nats-server
// takes (-t: parsed and checked, nothing started).
func TestDeployKubernetesNATSConfigParses(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../deploy/k8s/jetledger.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var conf string
	for conf == "" {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct{ Name string }
			Data     map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("no ConfigMap nats-config with nats.conf: %v", err)
		}
		if o.Kind == "ConfigMap" && o.Metadata.Name == "nats-config" {
			conf = o.Data["nats.conf"]
		}
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(conf, "/data", filepath.Join(t.TempDir(), "data"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(natsServerBinary(t), "-t", "-c", path)
	cmd.Env = append(os.Environ(), "POD_NAME=nats-0", "NATS_TOKEN=tok")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-server -t: %v\n%s", err, out)
	}
}
