package config

import (
	"bytes"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Secrets come from files and environment variables, never from the configuration, and are
// never printed. A secret can still be written in the file by mistake: a password in the
// sasl block, a password pasted for the name of its variable, a key pasted for its path.
// The decoder's messages never quote the values of the arguments that name secrets
// (password_file, password_env, token_file, key_file); WriteDiagnostics prints no source
// line that may hold one (secretLines), whoever made the diagnostic: the parser, gohcl, this
// package or the runtime.

// secretWords are the words of an argument's name (split at "_" and "-") that say it holds,
// or names, a secret or a key.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "passphrase": true, "secret": true,
	"token": true, "key": true, "apikey": true, "credential": true, "credentials": true,
}

// secretText are the words that, on a line of the file in any case, say that it may hold a
// secret whatever it is: a JAAS configuration's password="...", a PEM private key.
var secretText = [][]byte{[]byte("password"), []byte("passwd"), []byte("private key")}

// saslPublic are the arguments of a sasl block whose lines are shown.
var saslPublic = map[string]bool{"mechanism": true, "username": true}

// secretLines returns the lines of file (numbered from 1) that may hold a secret:
//
//   - every line that mentions, in any case, a password or a private key;
//   - every line of an argument (in any block) whose name says it holds or names a secret
//     (password_file, password_env, token_file, key_file, admin's token; password, secret,
//     api_key...), or one of whose lines is of the kind above (a key pasted in a heredoc);
//   - every line of a sasl block (the parser keeps one whose content it could not read), but
//     its "sasl {" and "}" lines and those that hold exactly a mechanism or username.
//
// It errs on the side of hiding: a hidden line costs a snippet, a shown one may cost a secret.
func secretLines(file *hcl.File) map[int]bool {
	lines := bytes.Split(file.Bytes, []byte("\n"))
	secret := map[int]bool{}
	for i, l := range lines {
		low := bytes.ToLower(l)
		for _, w := range secretText {
			if bytes.Contains(low, w) {
				secret[i+1] = true
			}
		}
	}
	if body, ok := file.Body.(*hclsyntax.Body); ok {
		markSecrets(body, file.Bytes, lines, secret)
	}
	return secret
}

// markSecrets adds to secret the lines of body's arguments and sasl blocks that may hold a
// secret, at every depth.
func markSecrets(body *hclsyntax.Body, src []byte, lines [][]byte, secret map[int]bool) {
	for _, a := range body.Attributes {
		r := a.SrcRange
		hide := secretName(a.Name)
		for l := r.Start.Line; l <= r.End.Line && !hide; l++ {
			hide = secret[l]
		}
		if hide {
			markLines(secret, r)
		}
	}
	for _, b := range body.Blocks {
		if b.Type == "sasl" {
			markSASL(b, src, lines, secret)
		}
		markSecrets(b.Body, src, lines, secret)
	}
}

// markSASL adds the lines of the sasl block b, but those that show no secret.
func markSASL(b *hclsyntax.Block, src []byte, lines [][]byte, secret map[int]bool) {
	r := b.Range()
	public := map[int]bool{}
	if r.Start.Line != r.End.Line {
		public[r.Start.Line] = compact(line(lines, r.Start.Line)) == b.Type+"{"
		public[r.End.Line] = compact(line(lines, r.End.Line)) == "}"
	}
	for name, a := range b.Body.Attributes {
		ar := a.SrcRange
		if saslPublic[name] && ar.Start.Line == ar.End.Line &&
			compact(line(lines, ar.Start.Line)) == compact(ar.SliceBytes(src)) {
			public[ar.Start.Line] = true
		}
	}
	for l := r.Start.Line; l <= r.End.Line; l++ {
		if !public[l] {
			secret[l] = true
		}
	}
}

// secretName reports whether an argument's name says that it holds or names a secret.
func secretName(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' }) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

func markLines(secret map[int]bool, r hcl.Range) {
	for l := r.Start.Line; l <= r.End.Line; l++ {
		secret[l] = true
	}
}

// line returns line n (from 1) of lines, or nil.
func line(lines [][]byte, n int) []byte {
	if n < 1 || n > len(lines) {
		return nil
	}
	return lines[n-1]
}

// compact returns b without white space.
func compact(b []byte) string {
	return strings.Join(strings.Fields(string(b)), "")
}

// showsSecret reports whether the source snippet of d, as hcl's text writer prints it (every
// line its subject and context ranges touch), holds a line that may hold a secret.
func showsSecret(d *hcl.Diagnostic, secret map[int]bool) bool {
	first, last := d.Subject.Start.Line, d.Subject.End.Line
	if c := d.Context; c != nil {
		first, last = min(first, c.Start.Line), max(last, c.End.Line)
	}
	// An empty range is shown as its first character, maybe on the next line.
	for l := first; l <= last+1; l++ {
		if secret[l] && (l <= last || d.Subject.Empty()) {
			return true
		}
	}
	return false
}
