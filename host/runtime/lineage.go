package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Lineage: what a rollback goes back to, across restarts.
//
// A deploy, a promotion or a rollback makes a module the processor's and the one it replaces
// the previous one, which Rollback goes back to (canary.go); the modules themselves are kept
// by hash in <state dir>/modules. The pair is also written to <state dir>/modules/lineage.json,
// so that an instance that starts again with the module it last ran (its module file holds
// the deployed module) can still roll back to the one before it. An instance that starts
// with another module (a deploy through the API ends with the process: the configuration's
// module runs again) has no previous module, as before any deploy.

// lineageFile is the file of the processors' lineages in the modules directory.
const lineageFile = "lineage.json"

// lineage is a processor's entry in lineageFile: its module and the one before it.
type lineage struct {
	Module   ModuleVersion `json:"module"`
	Previous ModuleVersion `json:"previous"`
}

// recordLineage writes p's module and previous module (none: p's entry goes) to
// lineageFile. The caller holds dp.mu, which orders the writes. A lineage that cannot be
// written is logged: a rollback after a restart is then refused, as before any deploy.
func (dp *deploys) recordLineage(p *processor, current ModuleVersion, previous *ModuleVersion) {
	path := filepath.Join(dp.modulesDir(), lineageFile)
	all, err := readLineages(path)
	if err == nil {
		if previous == nil {
			delete(all, p.cfg.Name)
		} else {
			all[p.cfg.Name] = lineage{Module: current, Previous: *previous}
		}
		err = writeLineages(path, all)
	}
	if err != nil {
		dp.rt.log.Warn("the module lineage is not kept: a rollback after a restart will find no previous module",
			"processor", p.cfg.Name, "error", err)
	}
}

// restoreLineage gives p, which starts with its configured module, the previous module of the
// lineage recorded for it, when that lineage's module is the one it starts with and the
// previous one is kept on disk.
func (dp *deploys) restoreLineage(p *processor) {
	all, err := readLineages(filepath.Join(dp.modulesDir(), lineageFile))
	if err != nil {
		dp.rt.log.Warn("the module lineage cannot be read: no rollback to a module before this start",
			"processor", p.cfg.Name, "error", err)
		return
	}
	l, ok := all[p.cfg.Name]
	if !ok || l.Module.Hash != p.version.Hash {
		return
	}
	if _, err := os.Stat(filepath.Join(dp.modulesDir(), l.Previous.Hash+".wasm")); err != nil {
		return
	}
	prev := l.Previous
	p.previous = &prev
}

// readLineages reads the lineage file at path; none yet is an empty one.
func readLineages(path string) (map[string]lineage, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]lineage{}, nil
	}
	if err != nil {
		return nil, err
	}
	all := map[string]lineage{}
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return all, nil
}

// writeLineages replaces the lineage file at path with all, atomically.
func writeLineages(path string, all map[string]lineage) error {
	b, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
