/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTheAWSCLICreatesAndDescribesACapacityReservation drives the emulator with the real AWS CLI, as a user
// setting up reserved capacity against the sandbox would. .ci/run installs the CLI and sets
// STEVEDORE_REQUIRE_AWSCLI, so CI fails rather than skips without it.
func TestTheAWSCLICreatesAndDescribesACapacityReservation(t *testing.T) {
	cli, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_AWSCLI") != "" {
			t.Fatal("the AWS CLI is not installed, and STEVEDORE_REQUIRE_AWSCLI says it must be")
		}
		t.Skip("the AWS CLI is not installed (.ci/run installs it)")
	}
	e, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"ec2", "--endpoint-url", e.URL(), "--region", e.Region(), "--output", "json"}, args...)...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=SECRET", "AWS_EC2_METADATA_DISABLED=true",
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("aws %s printed %q: %v", strings.Join(args, " "), out, err)
		}
		return doc
	}
	created := run("create-capacity-reservation", "--instance-type", "m5.large", "--instance-platform", "Linux/UNIX",
		"--availability-zone", "us-east-1a", "--instance-count", "2", "--instance-match-criteria", "targeted",
		"--tag-specifications", "ResourceType=capacity-reservation,Tags=[{Key=team,Value=ml}]")
	cr, _ := created["CapacityReservation"].(map[string]any)
	id, _ := cr["CapacityReservationId"].(string)
	if !strings.HasPrefix(id, "cr-") {
		t.Fatalf("create-capacity-reservation printed %v", created)
	}
	described := run("describe-capacity-reservations", "--filters", "Name=tag:team,Values=ml", "Name=state,Values=active")
	list, _ := described["CapacityReservations"].([]any)
	if len(list) != 1 {
		t.Fatalf("describe-capacity-reservations found %d reservations tagged team=ml, want 1: %v", len(list), described)
	}
	got, _ := list[0].(map[string]any)
	if got["CapacityReservationId"] != id || got["AvailableInstanceCount"] != float64(2) || got["InstanceType"] != "m5.large" {
		t.Errorf("described %v, want %s with 2 m5.large free", got, id)
	}
}
