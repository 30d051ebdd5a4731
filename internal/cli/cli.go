// Package cli is the one way surgepay's commands use the standard flag
// package, so that every command and subcommand behaves alike:
//
//   - -h, --help (and `surgepay help COMMAND`, which passes --help) print
//     the command's usage and flags on stdout and exit 0, before the
//     command does anything (creates no file or folder);
//   - a usage error (an unknown flag, a missing or extra argument) prints
//     one line on stderr, the reason and a hint to run `surgepay help
//     COMMAND`, and exits ExitUsage (2).
//
// It imports the standard library only.
package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes shared by the commands.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Command is the command line of one command, `surgepay Name`.
type Command struct {
	// Name is the words after "surgepay", e.g. "keys create".
	Name string
	// Usage is printed by --help before the flags: the synopsis, then
	// what the command does. It should end with a newline.
	Usage string
	// ExitUsage is the exit code of a usage error: ExitUsage unless the
	// command's documented contract says otherwise (loadtest).
	ExitUsage int
	// Flags are the command's flags; define them before Parse.
	Flags *flag.FlagSet
}

// New returns the command line of `surgepay name`, with no flags yet.
func New(name, usage string) *Command {
	fs := flag.NewFlagSet("surgepay "+name, flag.ContinueOnError)
	// Parse's own messages go nowhere: Parse reports errors in one line
	// and prints the usage on stdout only when asked for it.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &Command{Name: name, Usage: usage, ExitUsage: ExitUsage, Flags: fs}
}

// IsHelp reports whether arg asks for help: -h, -help, --help or help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// Parse parses args, which must hold flags only. ok is false when the
// command must stop and exit with code: ExitOK after the usage was
// printed on stdout (-h, --help), c.ExitUsage after a usage error was
// reported on stderr.
func (c *Command) Parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if err := c.Flags.Parse(args); err != nil {
		return c.parseError(err, stdout, stderr), false
	}
	if c.Flags.NArg() > 0 {
		return c.Fail(stderr, "unexpected argument %q", c.Flags.Arg(0)), false
	}
	return ExitOK, true
}

// ParseInterleaved is Parse for a command with positional arguments, which
// flags may precede or follow; it returns the positional arguments.
func (c *Command) ParseInterleaved(args []string, stdout, stderr io.Writer) (positional []string, code int, ok bool) {
	for {
		if err := c.Flags.Parse(args); err != nil {
			return nil, c.parseError(err, stdout, stderr), false
		}
		if c.Flags.NArg() == 0 {
			return positional, ExitOK, true
		}
		positional = append(positional, c.Flags.Arg(0))
		args = c.Flags.Args()[1:]
	}
}

func (c *Command) parseError(err error, stdout, stderr io.Writer) int {
	if err == flag.ErrHelp {
		c.PrintUsage(stdout)
		return ExitOK
	}
	return c.Fail(stderr, "%v", err)
}

// Fail reports a usage error of the command on stderr, in one line with a
// hint to its help, and returns c.ExitUsage.
func (c *Command) Fail(stderr io.Writer, format string, a ...any) int {
	Fail(stderr, c.Name, format, a...)
	return c.ExitUsage
}

// Fail reports a usage error of `surgepay name` on stderr in one line:
// the reason and a hint to run `surgepay help name` (name "": surgepay
// itself).
func Fail(stderr io.Writer, name, format string, a ...any) {
	reason := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
	cmd := strings.TrimSpace("surgepay " + name)
	help := strings.TrimSpace("surgepay help " + name)
	fmt.Fprintf(stderr, "%s: %s (run '%s')\n", cmd, reason, help)
}

// PrintUsage prints the usage and the flags, if any, on w.
func (c *Command) PrintUsage(w io.Writer) {
	fmt.Fprint(w, c.Usage)
	hasFlags := false
	c.Flags.VisitAll(func(*flag.Flag) { hasFlags = true })
	if !hasFlags {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	c.Flags.SetOutput(w)
	c.Flags.PrintDefaults()
	c.Flags.SetOutput(io.Discard)
}

// Subcommand checks the first argument of a command with subcommands
// (`surgepay keys create`): none is a usage error, -h/--help prints usage
// on stdout, one not in subs is a usage error. ok is false when the
// command must exit with code.
func Subcommand(args []string, name, usage string, subs []string, stdout, stderr io.Writer) (sub string, code int, ok bool) {
	switch {
	case len(args) == 0:
		Fail(stderr, name, "missing command: %s", strings.Join(subs, ", "))
		return "", ExitUsage, false
	case IsHelp(args[0]):
		fmt.Fprint(stdout, usage)
		return "", ExitOK, false
	}
	for _, s := range subs {
		if args[0] == s {
			return s, ExitOK, true
		}
	}
	Fail(stderr, name, "unknown command %q: %s", args[0], strings.Join(subs, ", "))
	return "", ExitUsage, false
}
