package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

const deploySynopsis = "[--config FILE] --processor NAME [--partitions LIST] FILE.wasm | --promote"

const deployUsage = `Deploys FILE.wasm as the module of the processor NAME of the running application of a
configuration file, through its admin API (admin.listen; an address without a host or with
0.0.0.0 is reached on 127.0.0.1; with admin.token, or STATEHOST_ADMIN_TOKEN, set, the request
carries it). The application validates the module off the processing
path, and each running task switches to it at its next commit, with its stores as they are.
Prints the version it runs now. If anything fails, the processor runs on as it was, and
deploy prints the application's error and exits 1.

With --partitions 0,3 the module is a canary: it runs on the processor's tasks of those
partitions only (whenever they run on this instance), the others run on their module.
--promote (without FILE.wasm) then runs it on every task; statehost rollback ends it instead.
`

// deployTimeout bounds a deploy: the application answers once every task switched, or after
// its own wait of 2 minutes.
const deployTimeout = 5 * time.Minute

// deployOptions are the flags and argument of statehost deploy.
type deployOptions struct {
	config     string
	processor  string
	partitions string // a canary's, "0,3"
	promote    bool
	file       string
}

// deployCmd is `statehost deploy [--config FILE] --processor NAME FILE.wasm`: it posts the
// module to the admin API of the running application and prints the result.
func deployCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "deploy", deploySynopsis, deployUsage)
	var o deployOptions
	fs.StringVar(&o.config, "config", "config.hcl", "the application's configuration `file`")
	fs.StringVar(&o.processor, "processor", "", "the `NAME` of the processor that gets the module")
	fs.StringVar(&o.partitions, "partitions", "", "deploy as a canary on these partitions only, a comma-separated `LIST` such as 0,3")
	fs.BoolVar(&o.promote, "promote", false, "run the processor's canary on every task (no FILE.wasm)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case o.processor == "":
		return usageError(fs, "--processor is required")
	case o.promote && (len(pos) > 0 || o.partitions != ""):
		return usageError(fs, "--promote takes no FILE.wasm and no --partitions")
	case !o.promote && len(pos) != 1:
		return usageError(fs, "want one FILE.wasm, got %d arguments", len(pos))
	case !o.promote:
		o.file = pos[0]
	}
	cfg, ok := loadConfig(env, o.config, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("deploy")
	res, err := deploy(ctx, cfg, o)
	if err != nil {
		return failed(log, "cannot deploy", err)
	}
	printDeploy(env.Stdout, res)
	return exitOK
}

// printDeploy prints what a deploy, a canary, a promotion or a rollback did.
func printDeploy(w io.Writer, res runtime.DeployResult) {
	if res.Unchanged {
		fmt.Fprintf(w, "processor %s: already runs %s\n", res.Processor, shortHash(res.Version.Hash))
		return
	}
	tasks := "tasks"
	if res.Tasks == 1 {
		tasks = "task"
	}
	what := ""
	switch res.Action {
	case "canary":
		what = fmt.Sprintf(" (a canary on partitions %s)", joinPartitions(res.Partitions))
	case "promote":
		what = " (the canary, promoted)"
	case "rollback":
		what = " (rolled back)"
	}
	fmt.Fprintf(w, "processor %s: switched %d %s to %s%s (was %s)\n", res.Processor, res.Tasks, tasks,
		shortHash(res.Version.Hash), what, shortHash(res.Previous.Hash))
}

// errNoAdmin is the error of the command cmd for a configuration without an admin listener.
func errNoAdmin(cmd string) error {
	return fmt.Errorf("the config has no admin listener (admin { listen = ... }): statehost %s needs one", cmd)
}

// joinPartitions is "0,3".
func joinPartitions(parts []int32) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// deploy posts the module file o.file for the processor o.processor to the admin API of cfg,
// as a canary on o.partitions if set; or, with o.promote, promotes its canary.
func deploy(ctx context.Context, cfg *config.Config, o deployOptions) (runtime.DeployResult, error) {
	if o.promote {
		return postProcessor(ctx, cfg, "deploy", o.processor, "promote", nil, "its canary")
	}
	if cfg.Admin.Listen == "" {
		return runtime.DeployResult{}, errNoAdmin("deploy")
	}
	wasm, err := os.ReadFile(o.file)
	if err != nil {
		return runtime.DeployResult{}, fmt.Errorf("reading the module: %w", err)
	}
	path := "module"
	if o.partitions != "" {
		path += "?partitions=" + url.QueryEscape(o.partitions)
	}
	return postProcessor(ctx, cfg, "deploy", o.processor, path, wasm, o.file)
}

// postProcessor posts body (the module, or nothing) to /v1/processors/{processor}/{path} on the
// admin API of cfg, for the command cmd, and returns the application's DeployResult; what
// names what is posted in a refusal.
func postProcessor(ctx context.Context, cfg *config.Config, cmd, processor, path string, body []byte, what string) (runtime.DeployResult, error) {
	var res runtime.DeployResult
	if cfg.Admin.Listen == "" {
		return res, errNoAdmin(cmd)
	}
	addr, err := adminAddr(cfg.Admin.Listen)
	if err != nil {
		return res, err
	}
	u := "http://" + addr + "/v1/processors/" + url.PathEscape(processor) + "/" + path
	ctx, cancel := context.WithTimeout(ctx, deployTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return res, fmt.Errorf("%s to %s: %w", cmd, addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/wasm")
	}
	answer, status, err := adminDo(req, addr, cfg.Admin.Token, 1<<20)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cmd, err)
	}
	if status != http.StatusOK {
		return res, fmt.Errorf("%s refused %s for processor %s: %d %s: %s", addr, what, processor, status, http.StatusText(status), adminError(answer))
	}
	if err := json.Unmarshal(answer, &res); err != nil {
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
