package kongx_test

import (
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/jetledger/jetledger/internal/kongx"
)

func ExampleComplete() {
	var cli struct {
		Level string `enum:"debug,info,warn" default:"info"`
		Serve struct {
			Addr string
		} `cmd:""`
		Status struct{} `cmd:""`
	}
	opts, err := kongx.Options(kongx.Config{Name: "app", EnvPrefix: "APP"})
	if err != nil {
		panic(err)
	}
	parser, err := kong.New(&cli, opts...)
	if err != nil {
		panic(err)
	}
	fmt.Println(kongx.Complete(parser.Model.Node, []string{"s"}))
	fmt.Println(kongx.Complete(parser.Model.Node, []string{"serve", "--"}))
	fmt.Println(kongx.Complete(parser.Model.Node, []string{"--level", ""}))
	// Output:
	// [serve status]
	// [--addr --help --level]
	// [debug info warn]
}

func ExampleOptions() {
	var cli struct {
		Deadline time.Duration `default:"10s"`
		Name     string
	}
	opts, err := kongx.Options(kongx.Config{Name: "app"})
	if err != nil {
		panic(err)
	}
	parser, err := kong.New(&cli, opts...)
	if err != nil {
		panic(err)
	}
	_, err = parser.Parse([]string{"--deadline", "2w"})
	fmt.Println(cli.Deadline, err)
	_, err = parser.Parse([]string{"--name", "--deadline", "1d"})
	fmt.Println(err)
	// Output:
	// 336h0m0s <nil>
	// --name: --name needs a value, not the flag --deadline (write --name=VALUE for a value that starts with '-')
}
