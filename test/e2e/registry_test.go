package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"nodehealth.io/nodehealth/test/framework"
	"nodehealth.io/nodehealth/test/framework/realnode"
)

// projectRegistry is the chart's default image.registry, the project's.
const projectRegistry = "ghcr.io"

// registryReady is the line hack/images/cmd/e2e-registry logs once it has
// pushed every image: the requests it logs after it are the node's.
const registryReady = "e2e-registry: ready"

// imageRegistry is an e2e-registry process on loopback serving product
// images under the names the project's registry gives them
// (ghcr.io/nodehealth/<binary>:v<appVersion>), which the real node's
// containerd reaches through a mirror entry for ghcr.io.
type imageRegistry struct {
	// endpoint is the registry's URL, the mirror of ghcr.io.
	endpoint string
	// tag is the chart's default image tag.
	tag string
	// digests are the index digests the registry answered, by binary.
	digests map[string]string
	proc    *framework.Process
}

// startRegistry runs e2e-registry with the OCI layouts hack/realnode-prereqs.sh
// built of binaries, pushed as ghcr.io/nodehealth/<binary>:v<appVersion>, and
// returns once they are pushed.
func (c *cluster) startRegistry(ctx context.Context, binaries ...string) *imageRegistry {
	c.t.Helper()
	bin := c.env.Binary("e2e-registry")
	if _, err := os.Stat(bin); err != nil {
		c.t.Fatalf("e2e-registry not built: run hack/realnode-prereqs.sh (%v)", err)
	}
	dir, err := realnode.ImagesDir()
	if err != nil {
		c.t.Fatal(err)
	}
	tag, err := chartImageTag()
	if err != nil {
		c.t.Fatal(err)
	}
	ports, err := framework.FreeLoopbackPorts(1)
	if err != nil {
		c.t.Fatal(err)
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	digests := filepath.Join(c.env.Dir, "registry-digests.txt")
	args := []string{"--addr", host, "--digests", digests}
	for _, b := range binaries {
		args = append(args, "--image", filepath.Join(dir, b)+"=nodehealth/"+b+":"+tag)
	}
	p, err := c.env.StartProcess(framework.ProcessSpec{Name: "e2e-registry", Path: bin, Args: args})
	if err != nil {
		c.t.Fatal(err)
	}
	r := &imageRegistry{endpoint: "http://" + host, tag: tag, digests: map[string]string{}, proc: p}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, werr := p.Exited(); exited {
			return false, fmt.Errorf("e2e-registry exited (%v):\n%s", werr, p.LogTail(20))
		}
		_, err := os.Stat(digests)
		return err == nil, nil
	})
	if err != nil {
		c.t.Fatalf("the registry's digests: %v", err)
	}
	data, err := os.ReadFile(digests)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Fields(string(data)) {
		ref, digest, ok := strings.Cut(line, "@")
		b := strings.TrimSuffix(strings.TrimPrefix(ref, "nodehealth/"), ":"+tag)
		if !ok || !strings.HasPrefix(digest, "sha256:") {
			c.t.Fatalf("e2e-registry wrote %q, want nodehealth/<binary>:%s@sha256:...", line, tag)
		}
		r.digests[b] = digest
	}
	for _, b := range binaries {
		if r.digests[b] == "" {
			c.t.Fatalf("e2e-registry pushed no %s: %s", b, data)
		}
	}
	c.t.Logf("registry %s serves %s", r.endpoint, strings.Join(strings.Fields(string(data)), ", "))
	return r
}

// chartImageTag is the chart's default image tag: v + its appVersion.
func chartImageTag() (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "charts", "nodehealth", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil || chart.AppVersion == "" {
		return "", fmt.Errorf("the chart's appVersion: %v", err)
	}
	return "v" + strings.TrimPrefix(chart.AppVersion, "v"), nil
}

// image is a binary's image as the chart names it, pinned by the digest the
// registry answered: <registry>/nodehealth/<binary>:<tag>@<digest>.
func (r *imageRegistry) image(binary string) string {
	return projectRegistry + "/nodehealth/" + binary + ":" + r.tag + "@" + r.digests[binary]
}

// checkPulled fails the test unless the container of pod runs binary's
// image by the digest the registry answered (the kubelet's imageID is the
// repo digest containerd resolved and verified the content against), and
// the registry served that manifest to the node after its pushes.
func (r *imageRegistry) checkPulled(c *cluster, pod *corev1.Pod, container, binary string) {
	c.t.Helper()
	want := projectRegistry + "/nodehealth/" + binary + "@" + r.digests[binary]
	var got string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			got = s.ImageID
		}
	}
	if got != want {
		c.t.Errorf("container %s of %s/%s runs image %q, want %q (pushed to the registry)", container, pod.Namespace, pod.Name, got, want)
	}
	gets := r.manifestGets(c, binary)
	if gets == 0 {
		c.t.Errorf("the registry never served the manifest of %s@%s to the node (%s)", binary, r.digests[binary], r.proc.LogPath)
	}
	c.t.Logf("%s/%s %s: imageID %s; the registry served its manifest %d times", pod.Namespace, pod.Name, container, got, gets)
}

// manifestGets counts the GETs of binary's manifest by digest the registry
// logged after it was ready, through the mirror of ghcr.io (containerd
// names the registry it mirrors in the query: ?ns=ghcr.io).
func (r *imageRegistry) manifestGets(c *cluster, binary string) int {
	c.t.Helper()
	f, err := os.Open(r.proc.LogPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	want := "GET /v2/nodehealth/" + binary + "/manifests/" + r.digests[binary] + "?ns=" + projectRegistry
	ready, n := false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasSuffix(line, registryReady):
			ready = true
		case ready && strings.Contains(line, want):
			n++
		}
	}
	if err := sc.Err(); err != nil {
		c.t.Fatal(err)
	}
	return n
}
