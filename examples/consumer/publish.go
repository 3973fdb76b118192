package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetledger/jetledger/publisher"
	"github.com/nats-io/nats.go/jetstream"
)

// snippet:publish
// publishOrders publishes each order with a stable Nats-Msg-Id (a new ULID,
// kept across the publisher's retries), so the stream's duplicate window and
// the ledger both see a retried publish as the same message.
func publishOrders(ctx context.Context, js jetstream.JetStream, orders []order) error {
	pub, err := publisher.New(js, publisher.Config{})
	if err != nil {
		return err
	}
	msgs := make([]publisher.Message, len(orders))
	for i, o := range orders {
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		msgs[i] = publisher.Message{Subject: "orders.new", ExpectStream: "ORDERS", Data: data}
	}
	acks, err := pub.PublishBatch(ctx, msgs) // in order; acks so far are returned with an error
	if err != nil {
		return fmt.Errorf("published %d of %d: %w", len(acks), len(msgs), err)
	}
	return nil
}

// end snippet
