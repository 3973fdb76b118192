package lazyfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Served is a mount served by a lazyfsd child process: for tests whose own
// process uses the mount through mmap, which the process serving a FUSE
// mount must not do.
type Served struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

var daemon struct {
	once sync.Once
	path string
	err  error
}

// daemonPath builds lazyfsd once per test process.
func daemonPath() (string, error) {
	daemon.once.Do(func() {
		dir, err := os.MkdirTemp("", "lazyfsd-*")
		if err != nil {
			daemon.err = err
			return
		}
		daemon.path = filepath.Join(dir, "lazyfsd")
		out, err := exec.Command("go", "build", "-o", daemon.path, "github.com/jetledger/jetledger/integration/lazyfs/lazyfsd").CombinedOutput()
		if err != nil {
			daemon.err = fmt.Errorf("build lazyfsd: %v\n%s", err, out)
		}
	})
	return daemon.path, daemon.err
}

// ServeForTest mounts backing at mountpoint from a child process and
// unmounts it cleanly when the test ends. Like MountForTest it skips the
// test, naming the reason, where FUSE cannot be used.
func ServeForTest(tb testing.TB, backing, mountpoint string, opts Options) *Served {
	tb.Helper()
	bin, err := daemonPath()
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"-backing", backing, "-mount", mountpoint, "-sync-delay", opts.SyncDelay.String()}
	if opts.StrictNamespace {
		args = append(args, "-strict")
	}
	s := &Served{cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
		}
		s.done <- s.cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			err := <-s.done
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 3 {
				tb.Skipf("lazyfs: FUSE is not available here: %s", bytes.TrimSpace(s.stderr.Bytes()))
			}
			tb.Fatalf("lazyfsd did not start: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill() //nolint:errcheck // giving up
		tb.Fatalf("lazyfsd not ready within 30s\n%s", s.stderr.String())
	}
	tb.Cleanup(func() {
		if err := s.stop(syscall.SIGTERM); err != nil {
			tb.Errorf("lazyfsd unmount: %v", err)
		}
	})
	return s
}

// PowerCut throws away everything not yet durable and unmounts. Every
// process using the mount must have been killed first.
func (s *Served) PowerCut() error { return s.stop(syscall.SIGUSR1) }

func (s *Served) stop(sig syscall.Signal) error {
	if s.cmd.ProcessState != nil {
		return nil // already ended
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("%w: %s", err, s.stderr.String())
		}
		return nil
	case <-time.After(unmountWait):
		s.cmd.Process.Kill() //nolint:errcheck // giving up
		return fmt.Errorf("lazyfsd did not stop within %s", unmountWait)
	}
}
