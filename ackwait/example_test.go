package ackwait_test

import (
	"fmt"
	"time"

	"github.com/jetledger/jetledger/ackwait"
)

func ExamplePlan_Validate() {
	p := ackwait.Plan{Deadline: 10 * time.Second, BatchSize: 100}
	fmt.Println("AckWait needed:", p.AckWait())
	err := p.Validate(ackwait.Durable{Name: "billing", ExplicitAck: true, AckWait: 5 * time.Second})
	fmt.Println(err)
	// Output:
	// AckWait needed: 19.1s
	// ackwait: consumer AckWait is 5s but the plan needs at least 19.1s (buffer 2s + deadline 10s + commit 5.1s + ack 2s = 19.1s); raise the consumer's AckWait to 19.1s or more, or shorten the plan's deadline or batch
}

func ExampleParseDuration() {
	for _, s := range []string{"7d", "2w", "1d12h", "90s"} {
		d, err := ackwait.ParseDuration(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s, d)
	}
	// Output:
	// 7d 168h0m0s
	// 2w 336h0m0s
	// 1d12h 36h0m0s
	// 90s 1m30s
}
