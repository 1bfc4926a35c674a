package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

const deploySynopsis = "[--config FILE] --processor NAME FILE.wasm"

const deployUsage = `Deploys FILE.wasm as the module of the processor NAME of the running application of a
configuration file, through its admin API (admin.listen; an address without a host or with
0.0.0.0 is reached on 127.0.0.1; with admin.token, or STATEHOST_ADMIN_TOKEN, set, the request
carries it). The application validates the module off the processing
path, and each running task switches to it at its next commit, with its stores as they are.
Prints the version it runs now. If anything fails, the processor runs on as it was, and
deploy prints the application's error and exits 1.
`

// deployTimeout bounds a deploy: the application answers once every task switched, or after
// its own wait of 2 minutes.
const deployTimeout = 5 * time.Minute

// deployOptions are the flags and argument of statehost deploy.
type deployOptions struct {
	config    string
	processor string
	file      string
}

// deployCmd is `statehost deploy [--config FILE] --processor NAME FILE.wasm`: it posts the
// module to the admin API of the running application and prints the result.
func deployCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deploy", deploySynopsis, deployUsage)
	var o deployOptions
	fs.StringVar(&o.config, "config", "config.hcl", "the application's configuration `file`")
	fs.StringVar(&o.processor, "processor", "", "the `NAME` of the processor that gets the module")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if o.processor == "" {
		return usageError(fs, "--processor is required")
	}
	if len(pos) != 1 {
		return usageError(fs, "want one FILE.wasm, got %d arguments", len(pos))
	}
	o.file = pos[0]
	cfg, ok := loadConfig(env, o.config, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("deploy")
	res, err := deploy(ctx, cfg, o)
	if err != nil {
		return failed(log, "cannot deploy", err)
	}
	if res.Unchanged {
		fmt.Fprintf(env.Stdout, "processor %s: already runs %s\n", res.Processor, shortHash(res.Version.Hash))
		return exitOK
	}
	tasks := "tasks"
	if res.Tasks == 1 {
		tasks = "task"
	}
	fmt.Fprintf(env.Stdout, "processor %s: switched %d %s to %s (was %s)\n", res.Processor, res.Tasks, tasks,
		shortHash(res.Version.Hash), shortHash(res.Previous.Hash))
	return exitOK
}

// deploy posts the module file o.file for the processor o.processor to the admin API of cfg.
func deploy(ctx context.Context, cfg *config.Config, o deployOptions) (runtime.DeployResult, error) {
	var res runtime.DeployResult
	if cfg.Admin.Listen == "" {
		return res, errors.New("the config has no admin listener (admin { listen = ... }): statehost deploy needs one")
	}
	addr, err := adminAddr(cfg.Admin.Listen)
	if err != nil {
		return res, err
	}
	wasm, err := os.ReadFile(o.file)
	if err != nil {
		return res, fmt.Errorf("reading the module: %w", err)
	}
	u := "http://" + addr + "/v1/processors/" + url.PathEscape(o.processor) + "/module"
	ctx, cancel := context.WithTimeout(ctx, deployTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(wasm))
	if err != nil {
		return res, fmt.Errorf("deploying to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/wasm")
	body, status, err := adminDo(req, addr, cfg.Admin.Token, 1<<20)
	if err != nil {
		return res, fmt.Errorf("deploying: %w", err)
	}
	if status != http.StatusOK {
		return res, fmt.Errorf("%s refused %s for processor %s: %d %s: %s", addr, o.file, o.processor, status, http.StatusText(status), adminError(body))
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return res, fmt.Errorf("reading the answer of %s: %w", addr, err)
	}
	return res, nil
}

// adminAddr returns the address to reach an admin listener on listen: a listener on every
// interface (no host, 0.0.0.0 or ::) is reached on 127.0.0.1.
func adminAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("admin listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// shortHash is the first 12 hex digits of a module hash, as the logs show it.
func shortHash(hash string) string { return hash[:min(12, len(hash))] }
