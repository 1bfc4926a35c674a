package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

const reloadSynopsis = "[--config FILE]"

const reloadUsage = `Asks the running instance of the application of a configuration file to reload its
configuration file (the one it was started with) through its admin API (POST /v1/reload on
admin.listen; an address without a host or with 0.0.0.0 is reached on 127.0.0.1; with
admin.token, or STATEHOST_ADMIN_TOKEN, set, the request carries it), as a change of the file
or SIGHUP does. What a running instance can apply applies live: a new processor (its tasks
wait until every instance of the group has it), a store added to a processor or removed from
it while its changelog is empty, on_error, commit_interval and a changelog's topic_config.
Anything else is refused: reload prints each problem as file:line and exits 1, and the
running configuration stays. Each instance reloads its own file: run reload against each.
`

// reloadTimeout bounds a reload: the application answers once it applied it at a commit
// boundary, or after its own wait of 2 minutes.
const reloadTimeout = 3 * time.Minute

// reloadCmd is `statehost reload [--config FILE]`.
func reloadCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "reload", reloadSynopsis, reloadUsage)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	cfg, ok := loadConfig(env, *path, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("reload")
	res, err := reload(ctx, cfg)
	if err != nil {
		return failed(log, "cannot reload", err)
	}
	printReload(env.Stdout, env.Stderr, res)
	if res.Error != "" {
		return exitFailure
	}
	return exitOK
}

// reload posts a reload to the admin API of cfg and returns the instance's answer: an
// answer with Error set is a refused reload; err is a failure to get one.
func reload(ctx context.Context, cfg *config.Config) (runtime.ReloadResult, error) {
	var res runtime.ReloadResult
	if cfg.Admin.Listen == "" {
		return res, errors.New("the config has no admin listener (admin { listen = ... }): statehost reload needs one")
	}
	addr, err := adminAddr(cfg.Admin.Listen)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/reload", nil)
	if err != nil {
		return res, fmt.Errorf("reloading through %s: %w", addr, err)
	}
	body, status, err := adminDo(req, addr, cfg.Admin.Token, 1<<20)
	if err != nil {
		return res, fmt.Errorf("reloading: %w", err)
	}
	if jerr := json.Unmarshal(body, &res); jerr != nil || (status != http.StatusOK && res.Error == "") {
		return res, fmt.Errorf("%s answered %d %s: %s", addr, status, http.StatusText(status), adminError(body))
	}
	return res, nil
}

// printReload prints what a reload did to out, or why it was refused to errOut: one
// file:line:col line per problem, with its detail indented.
func printReload(out, errOut io.Writer, res runtime.ReloadResult) {
	if res.Error != "" {
		if len(res.Diagnostics) == 0 {
			fmt.Fprintf(errOut, "%s: reload refused: %s\n", res.File, res.Error)
		}
		for _, d := range res.Diagnostics {
			fmt.Fprintf(errOut, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Severity, d.Summary)
			if d.Detail != "" {
				fmt.Fprintf(errOut, "  %s\n", strings.ReplaceAll(d.Detail, "\n", "\n  "))
			}
		}
		fmt.Fprintf(errOut, "%s: the running configuration stays\n", res.File)
		return
	}
	if len(res.Changes) == 0 {
		fmt.Fprintf(out, "%s: nothing changed\n", res.File)
		return
	}
	fmt.Fprintf(out, "%s: reloaded\n", res.File)
	for _, c := range res.Changes {
		fmt.Fprintf(out, "  %s\n", c)
	}
	for _, p := range res.Pending {
		fmt.Fprintf(out, "  processor %q waits for every instance of the group to have it\n", p)
	}
}

// reloadOnHangup reloads rt's configuration file at each SIGHUP until the returned function
// is called (the reload logs and emits its outcome).
func reloadOnHangup(ctx context.Context, rt *runtime.Runtime, log hclog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the configuration")
				_, _ = rt.ReloadFile(ctx, "signal")
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-ended
	}
}
