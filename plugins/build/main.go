// Command build builds every plugin under plugins/ to plugins/<name>/<name>.wasm.
//
// Run it from the repository root:
//
//	go run ./plugins/build            # all plugins
//	go run ./plugins/build count      # only the named ones
//	go run ./plugins/build -update-prebuilt   # also refresh the checked-in C builds
//
// A directory with <name>.c is a C guest, built with clang (pluginsdk/wasmbuild.ClangArgs);
// without clang its checked-in build testdata/<name>.wasm is copied instead, and the command
// says so. Any other directory with Go files is a Go plugin, built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

func main() {
	root := flag.String("dir", "plugins", "the plugins directory")
	updatePrebuilt := flag.Bool("update-prebuilt", false, "copy fresh C builds to <name>/testdata/<name>.wasm")
	flag.Parse()
	if err := build(context.Background(), *root, flag.Args(), *updatePrebuilt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func build(ctx context.Context, root string, only []string, updatePrebuilt bool) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	abiDir, err := filepath.Abs(filepath.Join(root, "..", "abi"))
	if err != nil {
		return err
	}
	built := 0
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == "build" || name == "testdata" || name == "internal" || (len(only) > 0 && !slices.Contains(only, name)) {
			continue
		}
		dir, _ := filepath.Abs(filepath.Join(root, name))
		out := filepath.Join(dir, name+".wasm")
		src := filepath.Join(dir, name+".c")
		switch {
		case exists(src) && wasmbuild.HaveClang():
			if err := wasmbuild.C(ctx, src, out, abiDir); err != nil {
				return err
			}
			if updatePrebuilt {
				if err := copyFile(out, filepath.Join(dir, "testdata", name+".wasm")); err != nil {
					return err
				}
			}
		case exists(src):
			prebuilt := filepath.Join(dir, "testdata", name+".wasm")
			fmt.Printf("%s: clang for wasm32-wasi not found: copying %s\n", name, prebuilt)
			if err := copyFile(prebuilt, out); err != nil {
				return err
			}
		default:
			if gos, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(gos) == 0 {
				continue
			}
			if err := wasmbuild.Go(ctx, dir, out); err != nil {
				return err
			}
		}
		fmt.Println(filepath.Join(root, name, name+".wasm"))
		built++
	}
	if built == 0 {
		return fmt.Errorf("build: no plugin found under %s", root)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
