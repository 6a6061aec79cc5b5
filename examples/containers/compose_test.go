package containers

import (
	"context"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// compose.yaml is valid as Docker Compose reads it (compose-go, its loader,
// checks it against the Compose Specification's schema), and says what the
// README says of it: Orrery built from the repository, published on this
// machine's loopback only, its certificate naming the service, its data in
// a volume, and the program started once Orrery is healthy.
func TestComposeFileIsValid(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"}, cli.WithWorkingDirectory("."), cli.WithName("orrery-example"))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	orrery, ok := project.Services["orrery"]
	if !ok {
		t.Fatal("no orrery service")
	}
	if orrery.Build == nil || orrery.Build.Dockerfile != "Dockerfile" {
		t.Errorf("orrery is not built from the repository's Dockerfile: %+v", orrery.Build)
	}
	if !slices.Contains(orrery.Command, "--tls-san") || !slices.Contains(orrery.Command, "orrery") {
		t.Errorf("the certificate does not name the service: command %v", orrery.Command)
	}
	if len(orrery.Ports) != 1 || orrery.Ports[0].HostIP != "127.0.0.1" || orrery.Ports[0].Target != 8081 {
		t.Errorf("ports %+v; want 8081 published on 127.0.0.1 only", orrery.Ports)
	}
	if len(orrery.Volumes) != 1 || orrery.Volumes[0].Target != "/data" {
		t.Errorf("volumes %+v; want the data at /data", orrery.Volumes)
	}
	if orrery.HealthCheck == nil || !slices.Equal(orrery.HealthCheck.Test, []string{"CMD", "/orrery", "health"}) {
		t.Errorf("health check %+v", orrery.HealthCheck)
	}
	connect, ok := project.Services["connect"]
	if !ok {
		t.Fatal("no connect service")
	}
	if dep, ok := connect.DependsOn["orrery"]; !ok || dep.Condition != "service_healthy" {
		t.Errorf("connect does not wait for a healthy orrery: %+v", connect.DependsOn)
	}
}
