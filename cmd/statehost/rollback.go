package main

import (
	"context"

	"github.com/statehost/statehost/config"
)

const rollbackSynopsis = "[--config FILE] --processor NAME"

const rollbackUsage = `Rolls the processor NAME of the running application of a configuration file back, through
its admin API (POST /v1/processors/NAME/rollback on admin.listen, reached as deploy reaches
it): a canary (deploy --partitions) ends, its tasks going back to the processor's module;
otherwise the processor runs the module it ran before its last deploy again, which the
instance kept in its state directory by hash. Where that deploy migrated a store to a
version the older module cannot read, the rollback migrates it back, task by task, if the
module it leaves declares the migration reversible; if not, it is refused, rollback prints
why and exits 1, and the processor runs on as it was. Prints the version it runs now.
`

// rollbackCmd is `statehost rollback [--config FILE] --processor NAME`.
func rollbackCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "rollback", rollbackSynopsis, rollbackUsage)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	processor := fs.String("processor", "", "the `NAME` of the processor to roll back")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case *processor == "":
		return usageError(fs, "--processor is required")
	case len(pos) > 0:
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	cfg, ok := loadConfig(env, *path, config.Options{})
	if !ok {
		return exitFailure
	}
	res, err := postProcessor(ctx, cfg, "rollback", *processor, "rollback", nil, "a rollback")
	if err != nil {
		return failed(env.Logger.Named("rollback"), "cannot roll back", err)
	}
	printDeploy(env.Stdout, res)
	return exitOK
}
