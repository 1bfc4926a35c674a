package runtime

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDeployHistory: GET /v1/deploys lists the deploys made through the admin API, the latest
// first, each with its outcome (unchanged, deployed, refused), its module and the one it
// replaced, where it came from, and a refusal's error; the modules loaded at start are not in
// it.
func TestDeployHistory(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), fmt.Sprintf(adminHCL, modules["count"])), brokers, func(o *Options) { o.NoWatch = true })
	srv := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv.Close)
	var history []DeployRecord
	if adminGet(t, srv, "/v1/deploys", &history); len(history) != 0 {
		t.Fatalf("GET /v1/deploys before any deploy: %+v, want []", history)
	}
	waitFor(t, 30*time.Second, "the 2 tasks of count", func() bool { return adminProcessors(t, srv)[0].Tasks == 2 })

	v1, v2 := mustRead(t, modules["count"]), mustRead(t, modules["countv2"])
	adminDeploy(t, srv, "count", v1)
	adminDeploy(t, srv, "count", v2)
	if code, body := adminPost(t, srv, "count", []byte("not wasm")); code != http.StatusUnprocessableEntity {
		t.Fatalf("deploying garbage: %d %s, want 422", code, body)
	}

	adminGet(t, srv, "/v1/deploys", &history)
	if len(history) != 3 {
		t.Fatalf("GET /v1/deploys: %+v, want 3 deploys", history)
	}
	refused, deployed, unchanged := history[0], history[1], history[2]
	for _, tc := range []struct {
		rec                  DeployRecord
		result, hash, before string
		tasks                int
	}{
		{unchanged, "unchanged", sha256Hex(v1), "", 0},
		{deployed, "deployed", sha256Hex(v2), sha256Hex(v1), 2},
		{refused, "refused", "", "", 0},
	} {
		r := tc.rec
		if r.Processor != "count" || r.Result != tc.result || r.Hash != tc.hash || r.Previous != tc.before && tc.result == "deployed" ||
			r.Tasks != tc.tasks || !strings.HasPrefix(r.Origin, "api ") || r.Time.IsZero() {
			t.Errorf("%s deploy: %+v, want module %.12s replacing %.12s, %d tasks, from the API", tc.result, r, tc.hash, tc.before, tc.tasks)
		}
	}
	if !refused.Time.After(deployed.Time) || !strings.Contains(refused.Error, "compile") || deployed.Error != "" {
		t.Errorf("the refused deploy: %+v after %+v, want later and with the compile error", refused, deployed)
	}
}
