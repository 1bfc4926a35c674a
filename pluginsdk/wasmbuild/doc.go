// Package wasmbuild builds statehost plugins to WebAssembly: Go plugin packages with the Go
// toolchain, C guests with clang and wasi-libc, AssemblyScript projects with npm and asc. It
// runs natively, for tools and tests.
package wasmbuild
