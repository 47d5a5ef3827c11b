/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// imdsAnswering serves the two requests the SDK makes of the instance metadata service for the region (IMDSv2: a
// session token, then the instance identity document), and counts them.
func imdsAnswering(t *testing.T, region string, asked *int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*asked++
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			_, _ = w.Write([]byte("token"))
		case r.Method == http.MethodGet && r.URL.Path == "/latest/dynamic/instance-identity/document" && r.Header.Get("X-Aws-Ec2-Metadata-Token") == "token":
			_, _ = w.Write([]byte(`{"region": "` + region + `", "availabilityZone": "` + region + `a", "instanceId": "i-0123456789abcdef0"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTheRegionComesFromTheArgumentTheEnvironmentOrIMDS: the region argument first, then $AWS_REGION, then the
// instance metadata service, which is not asked when either is set or when it is disabled.
func TestTheRegionComesFromTheArgumentTheEnvironmentOrIMDS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		arg       string
		env       map[string]string
		want      string
		wantErr   string
		imdsAsked bool
	}{
		{name: "the argument", arg: "ap-south-1", want: "ap-south-1"},
		{name: "AWS_REGION", env: map[string]string{"AWS_REGION": "eu-central-1"}, want: "eu-central-1"},
		{name: "IMDS", want: "eu-west-1", imdsAsked: true},
		{name: "IMDS disabled", env: map[string]string{"AWS_EC2_METADATA_DISABLED": "true"}, wantErr: "no AWS region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			srv := imdsAnswering(t, "eu-west-1", &asked)
			// the SDK reads these from the process's environment
			t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL)
			t.Setenv("AWS_REGION", "")
			t.Setenv("AWS_DEFAULT_REGION", "")
			t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
			t.Setenv("AWS_EC2_METADATA_DISABLED", tc.env["AWS_EC2_METADATA_DISABLED"])
			env := func(k string) string { return tc.env[k] }
			got, err := Region(t.Context(), tc.arg, env)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Region = %q, %v; want an error saying %q", got, err, tc.wantErr)
				}
			case err != nil || got != tc.want:
				t.Fatalf("Region = %q, %v; want %q", got, err, tc.want)
			}
			if (asked > 0) != tc.imdsAsked {
				t.Errorf("IMDS asked %d times, want asked: %v", asked, tc.imdsAsked)
			}
		})
	}
}
