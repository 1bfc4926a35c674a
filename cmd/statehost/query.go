package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

const querySynopsis = "[--config FILE] [--stale] [--partition N] STORE KEY"

const queryUsage = `Prints the value of KEY in the key-value store STORE of the running application of a
configuration file, as its admin API answers it (admin.listen): the instance there answers
from its copy, or redirects to the instance that runs the key's task (the request carries
the admin token of the configuration, if any, there too). The value is printed
byte for byte (a newline follows on a terminal only). Exits 1 when the key is absent (with a
message on stderr), or when the store cannot answer now (its task restores or moves: retry,
or pass --stale to read a restoring or standby copy).

The key is looked for in the partition of its own murmur2 hash over the store's input
partitions, which is where the task keyed by it writes it. A store keyed otherwise than its
input records (say <account>/<seq>, written by the task of <account>) needs --partition N,
the partition of the task that wrote the key.
`

const statusSynopsis = "[--config FILE] [--json]"

const statusUsage = `Prints the tasks of the running application instance of a configuration file, through its
admin API (admin.listen): each task's state (restoring, running, standby), its changelog lag,
the progress of its stores' restores (records restored of total, rate, time left), and the
module versions of the processors.
`

// adminTimeout bounds a query or a status request.
const adminTimeout = 30 * time.Second

// queryCmd is `statehost query [--config FILE] [--stale] [--partition N] STORE KEY`.
func queryCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "query", querySynopsis, queryUsage)
	cfgPath := fs.String("config", "config.hcl", "the application's configuration `file`")
	stale := fs.Bool("stale", false, "also read a copy that is restoring or a standby")
	partition := fs.String("partition", "", "read partition `N` of the store, instead of the partition of the key's hash")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return usageError(fs, "want STORE and KEY, got %d arguments", len(pos))
	}
	cfg, ok := loadConfig(env, *cfgPath, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("query")
	path := "/v1/stores/" + url.PathEscape(pos[0]) + "/keys/" + url.PathEscape(pos[1])
	q := url.Values{}
	if *stale {
		q.Set("stale", "true")
	}
	if *partition != "" {
		q.Set("partition", *partition)
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, status, err := adminGet(ctx, cfg, path)
	switch {
	case err != nil:
		return failed(log, "cannot query", err)
	case status == http.StatusNotFound:
		fmt.Fprintf(env.Stderr, "%s\n", adminError(body))
		return exitFailure
	case status != http.StatusOK:
		return failed(log, "cannot query", fmt.Errorf("%s: %s", http.StatusText(status), adminError(body)))
	}
	_, _ = env.Stdout.Write(body)
	// The value as it is, byte for byte (query s k > v.bin); on a terminal, a line.
	if f, ok := env.Stdout.(*os.File); ok && isatty.IsTerminal(f.Fd()) && len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(env.Stdout)
	}
	return exitOK
}

// statusCmd is `statehost status [--config FILE] [--json]`.
func statusCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "status", statusSynopsis, statusUsage)
	cfgPath := fs.String("config", "config.hcl", "the application's configuration `file`")
	asJSON := fs.Bool("json", false, "print the admin API's JSON as it is")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 0 {
		return usageError(fs, "want no arguments, got %d", len(pos))
	}
	cfg, ok := loadConfig(env, *cfgPath, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("status")
	body, status, err := adminGet(ctx, cfg, "/v1/status")
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("%s: %s", http.StatusText(status), adminError(body))
	}
	if err != nil {
		return failed(log, "cannot read the status", err)
	}
	if *asJSON {
		_, _ = env.Stdout.Write(body)
		return exitOK
	}
	var st runtime.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return failed(log, "cannot read the status", fmt.Errorf("the admin API's answer: %w", err))
	}
	writeStatus(env.Stdout, st)
	return exitOK
}

// writeStatus prints st as tables: tasks, then processors.
func writeStatus(w io.Writer, st runtime.Status) {
	fmt.Fprintf(w, "application %s", st.ApplicationID)
	if st.Admin != "" {
		fmt.Fprintf(w, " (instance %s)", st.Admin)
	}
	fmt.Fprintf(w, ": %d tasks\n\n", len(st.Tasks))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tLAG\tSTORE\tPROGRESS\tRATE\tLEFT")
	for _, ts := range st.Tasks {
		task := fmt.Sprintf("%s_%d", ts.Processor, ts.Partition)
		lag := "-"
		if ts.Lag >= 0 {
			lag = fmt.Sprint(ts.Lag)
		}
		if m := ts.Migration; m != nil {
			// A task that migrates a store: its entries migrated of the store's.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s (version %d to %d)\t%d of %d\t%.0f/s\t%s\n", task, ts.State, lag, m.Store,
				m.FromVersion, m.ToVersion, m.Migrated, m.Total, m.Rate, timeLeft(m.Done, m.ETASeconds))
			continue
		}
		if len(ts.Restores) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\n", task, ts.State, lag)
			continue
		}
		for i, rs := range ts.Restores {
			if i > 0 {
				task, lag = "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d of %d\t%.0f/s\t%s\n", task, ts.State, lag, rs.Store, rs.Restored, rs.Total, rs.Rate,
				timeLeft(rs.Done, rs.ETASeconds))
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESSOR\tMODULE\tLOADED\tTASKS\tPREVIOUS")
	for _, ps := range st.Processors {
		prev := "-"
		if ps.Previous != nil {
			prev = shortHash(ps.Previous.Hash)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", ps.Name, shortHash(ps.Current.Hash), ps.Current.LoadedAt.Format(time.RFC3339), ps.Tasks, prev)
	}
	_ = tw.Flush()
}

// timeLeft is the LEFT column of a restore or migration: "done", the time left, or "-" when
// not known (eta < 0).
func timeLeft(done bool, eta float64) string {
	switch {
	case done:
		return "done"
	case eta >= 0:
		return secondsDuration(eta).String()
	}
	return "-"
}

// adminGet GETs path from the admin API of cfg's application, following redirects to other
// instances, and returns the body and the status code.
func adminGet(ctx context.Context, cfg *config.Config, path string) ([]byte, int, error) {
	if cfg.Admin.Listen == "" {
		return nil, 0, errors.New("the config has no admin listener (admin { listen = ... })")
	}
	addr, err := adminAddr(cfg.Admin.Listen)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	return adminDo(req, addr, cfg.Admin.Token, 64<<20)
}

// adminClient is the HTTP client of the admin commands. An interactive query may answer 307
// to the instance that runs the key's task (which answers 503 rather than redirect again):
// adminClient follows that one redirect, of a GET of /v1/stores/..., with the Authorization
// header of the first request, which Go's client drops on a redirect to another host (all the
// instances of an application share one token). Any other redirect is not followed, so that
// the token and a deployed module go nowhere else.
var adminClient = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
	first := via[0]
	if len(via) > 1 || req.Response == nil || req.Response.StatusCode != http.StatusTemporaryRedirect ||
		first.Method != http.MethodGet || req.Method != http.MethodGet || req.URL.Scheme != "http" ||
		!strings.HasPrefix(first.URL.Path, "/v1/stores/") || !strings.HasPrefix(req.URL.Path, "/v1/stores/") {
		return http.ErrUseLastResponse // the caller sees the redirect as the answer
	}
	if auth := first.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	return nil
}}

// adminDo sends req to the admin API on addr, with the bearer token when not empty, and
// returns the body (at most limit bytes) and the status code; its errors name addr. A 401
// answer is an error that says which token to set.
func adminDo(req *http.Request, addr, token string, limit int64) ([]byte, int, error) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the method and URL
		}
		return nil, 0, fmt.Errorf("the admin API on %s (does the application run?): %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("reading the answer of %s: %w", addr, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		hint := "the configuration has no admin token: set admin.token or the environment variable " + config.AdminTokenEnv + " to the application's"
		if token != "" {
			hint = "the configuration's admin token (admin.token or " + config.AdminTokenEnv + ") is not the application's"
		}
		return nil, resp.StatusCode, fmt.Errorf("the admin API on %s refused the request (%s): %s", resp.Request.URL.Host, adminError(body), hint)
	}
	return body, resp.StatusCode, nil
}

// adminError is the message of an admin API error body {"error": "..."}, or the body.
func adminError(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(body))
}
