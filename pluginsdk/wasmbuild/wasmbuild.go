package wasmbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
)

// GoArgs returns the arguments of the go command that builds the plugin package in the
// current directory of the command to out.
func GoArgs(out string) []string {
	return []string{"build", "-buildmode=c-shared", "-o", out, "."}
}

// Go builds the Go plugin package in dir to the wasm module out:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o out .
func Go(ctx context.Context, dir, out string) error {
	cmd := exec.CommandContext(ctx, "go", GoArgs(out)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	return run(cmd)
}

// Sysroot is the wasi-libc installation the C build uses (Debian's wasi-libc package).
const Sysroot = "/usr"

// ClangArgs returns the clang arguments that build the C guest src to out, with the
// directories in include on the include path (the C header of the ABI is abi/statehost.h):
//
//	clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi
//	  -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc -I <include> -o out src
//
// -mexec-model=reactor makes a module without main whose _initialize runs the C
// constructors; -nodefaultlibs -lc links wasi-libc without compiler-rt, which Debian ships
// in a separate package that the guests do not need.
func ClangArgs(src, out string, include ...string) []string {
	args := []string{"--target=wasm32-wasi", "--sysroot=" + Sysroot, "-isystem", Sysroot + "/include/wasm32-wasi",
		"-L" + Sysroot + "/lib/wasm32-wasi", "-O2", "-mexec-model=reactor", "-nodefaultlibs", "-lc"}
	for _, dir := range include {
		args = append(args, "-I", dir)
	}
	return append(args, "-o", out, src)
}

// HaveClang reports whether this machine has what C guests need: clang, wasm-ld and the
// wasi-libc headers. Where it does, a failing C build is an error, not a reason to skip.
func HaveClang() bool {
	if _, err := exec.LookPath("clang"); err != nil {
		return false
	}
	if _, err := exec.LookPath("wasm-ld"); err != nil {
		return false
	}
	_, err := os.Stat(Sysroot + "/include/wasm32-wasi/stdlib.h")
	return err == nil
}

// C builds the C guest src to out with ClangArgs.
func C(ctx context.Context, src, out string, include ...string) error {
	return run(exec.CommandContext(ctx, "clang", ClangArgs(src, out, include...)...))
}

func run(cmd *exec.Cmd) error {
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("wasmbuild: %s: %w\n%s", cmd.String(), err, output.Bytes())
	}
	return nil
}
