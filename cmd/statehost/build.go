package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

const buildSynopsis = "DIR [-o FILE] [-I INCLUDE]..."

const buildUsage = `Builds the plugin in DIR to a WebAssembly module: a Go plugin package with
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared; or, when DIR has no Go files but a
<name>.c named after DIR, a C guest with clang for wasm32-wasi (clang, wasm-ld and
wasi-libc must be installed); or, when DIR has a package.json and an asconfig.json, an
AssemblyScript project with npm ci, then asc --target release (Node.js 20 or newer and npm
must be installed). For C, the include path has DIR, the -I directories, and the abi/
directory holding statehost.h in DIR or a parent of it, if there is one. Prints
"built FILE".
`

// buildOptions are the flags and argument of statehost build.
type buildOptions struct {
	dir      string
	out      string
	includes []string
}

func buildCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "build", buildSynopsis, buildUsage)
	var o buildOptions
	fs.StringVar(&o.out, "o", "", "output `FILE` (default DIR/<base of DIR>.wasm)")
	fs.Func("I", "add `INCLUDE` to the include path of a C build (repeatable)", func(dir string) error {
		o.includes = append(o.includes, dir)
		return nil
	})
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want one DIR, got %d arguments", len(pos))
	}
	o.dir = pos[0]
	log := env.Logger.Named("build")
	out, err := build(ctx, o)
	if err != nil {
		return failed(log, "cannot build", err)
	}
	fmt.Fprintf(env.Stdout, "built %s\n", out)
	return exitOK
}

// build builds the plugin in o.dir and returns the path of the module.
func build(ctx context.Context, o buildOptions) (string, error) {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", o.dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("building %s: %w", o.dir, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("building %s: not a directory", o.dir)
	}
	name := filepath.Base(dir)
	out := o.out
	if out == "" {
		out = filepath.Join(o.dir, name+".wasm")
	}
	absOut, err := filepath.Abs(out) // the go command runs in dir
	if err != nil {
		return "", fmt.Errorf("building %s: %w", o.dir, err)
	}

	goFiles, err := goSources(dir)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", o.dir, err)
	}
	src := filepath.Join(dir, name+".c")
	_, cErr := os.Stat(src)
	switch {
	case len(goFiles) > 0:
		if err := wasmbuild.Go(ctx, dir, absOut); err != nil {
			return "", fmt.Errorf("building Go plugin %s: %w", o.dir, err)
		}
	case cErr == nil:
		if !wasmbuild.HaveClang() {
			return "", fmt.Errorf("building C plugin %s: needs clang, wasm-ld and wasi-libc (%s/include/wasm32-wasi), not all found", o.dir, wasmbuild.Sysroot)
		}
		includes := append([]string{dir}, o.includes...)
		if abi := findABIDir(dir); abi != "" {
			includes = append(includes, abi)
		}
		if err := wasmbuild.C(ctx, src, absOut, includes...); err != nil {
			return "", fmt.Errorf("building C plugin %s: %w", o.dir, err)
		}
	case wasmbuild.IsAssemblyScript(dir):
		if why := wasmbuild.MissingNode(); why != "" {
			return "", fmt.Errorf("building AssemblyScript plugin %s: %s", o.dir, why)
		}
		if err := wasmbuild.AssemblyScript(ctx, dir, absOut); err != nil {
			return "", fmt.Errorf("building AssemblyScript plugin %s: %w", o.dir, err)
		}
	default:
		return "", fmt.Errorf("building %s: no Go files and no %s.c in it, nor a package.json and an asconfig.json (AssemblyScript)", o.dir, name)
	}
	return out, nil
}

// goSources returns the Go files of dir that are not tests.
func goSources(dir string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []string
	for _, m := range matches {
		if !strings.HasSuffix(m, "_test.go") {
			files = append(files, m)
		}
	}
	return files, nil
}

// findABIDir returns the abi directory holding statehost.h in dir or its closest parent
// that has one, or "".
func findABIDir(dir string) string {
	for {
		abi := filepath.Join(dir, "abi")
		if _, err := os.Stat(filepath.Join(abi, "statehost.h")); err == nil {
			return abi
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
