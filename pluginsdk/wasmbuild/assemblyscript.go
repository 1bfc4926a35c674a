package wasmbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// AssemblyScript projects are npm packages: a package.json whose lockfile pins
// assemblyscript (and the SDK, pluginsdk/assemblyscript), and an asconfig.json that names the
// entry file and extends the SDK's asconfig.base.json.
const (
	packageJSON = "package.json"
	packageLock = "package-lock.json"
	asconfig    = "asconfig.json"
)

// IsAssemblyScript reports whether dir holds an AssemblyScript project: a package.json and an
// asconfig.json.
func IsAssemblyScript(dir string) bool {
	for _, name := range []string{packageJSON, asconfig} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// MissingNode returns "" when Node.js and npm are on PATH, else a sentence that says what
// AssemblyScript builds need and how to install it.
func MissingNode() string {
	var missing []string
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	verb := " is"
	if len(missing) > 1 {
		verb = " are"
	}
	return "AssemblyScript builds need Node.js 20 or newer and npm, and " + strings.Join(missing, " and ") + verb +
		" not on PATH: install them (e.g. apt-get install nodejs npm, or from nodejs.org)"
}

// NpmCIArgs are the arguments of the npm command that installs a project's packages exactly
// as its lockfile says.
var NpmCIArgs = []string{"ci", "--no-audit", "--no-fund", "--loglevel=error"}

// AscArgs returns the arguments of asc (node_modules/.bin/asc) that compile the project in
// the current directory of the command to out: the entries and options of its asconfig.json,
// with the target "release".
func AscArgs(out string) []string {
	return []string{"--config", asconfig, "--target", "release", "--outFile", out}
}

// AssemblyScript builds the AssemblyScript project in dir to the wasm module out: it installs
// the packages of its lockfile with npm ci, then runs asc:
//
//	npm ci --no-audit --no-fund --loglevel=error
//	node_modules/.bin/asc --config asconfig.json --target release --outFile out
//
// Builds of one project take turns (a lock file in the temporary directory), so that
// processes that build it at once (parallel test packages) do not replace node_modules under
// each other.
func AssemblyScript(ctx context.Context, dir, out string) error {
	if why := MissingNode(); why != "" {
		return fmt.Errorf("wasmbuild: %s: %s", dir, why)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, packageLock)); err != nil {
		return fmt.Errorf("wasmbuild: %s has no %s: run npm install there once and keep the lockfile, which npm ci installs from", dir, packageLock)
	}
	sum := sha256.Sum256([]byte(dir))
	unlock, err := lockFile(filepath.Join(os.TempDir(), "statehost-npm-"+hex.EncodeToString(sum[:8])+".lock"))
	if err != nil {
		return fmt.Errorf("wasmbuild: %s: %w", dir, err)
	}
	defer unlock()
	npm := exec.CommandContext(ctx, "npm", NpmCIArgs...)
	npm.Dir = dir
	if err := run(npm); err != nil {
		return err
	}
	asc := filepath.Join(dir, "node_modules", ".bin", "asc")
	if _, err := os.Stat(asc); err != nil {
		return fmt.Errorf("wasmbuild: %s: npm ci installed no asc: add assemblyscript to the devDependencies of %s", dir, packageJSON)
	}
	cmd := exec.CommandContext(ctx, asc, AscArgs(out)...)
	cmd.Dir = dir
	return run(cmd)
}
