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
