// Package publisher publishes to JetStream with a stable Nats-Msg-Id on every
// message, so that a retried publish is dropped by the stream's duplicate
// window instead of being stored twice, and the consumer's ledger can tell a
// redelivery from a new message.
//
//	p, err := publisher.New(js, publisher.Config{})
//	ack, err := p.Publish(ctx, publisher.Message{Subject: "orders.created", Data: body})
//	// ack.ID is the ULID sent as Nats-Msg-Id; ack.Duplicate reports a retry the stream dropped.
//
// Ids are ULIDs, monotonic within the process, unless the caller gives its
// own (a webhook provider's event id, say): the same business event must
// always carry the same id.
//
// ReadLines turns JSON lines (a file of events, standard input) into
// messages, checking every line before anything is published and taking
// each id from a field of the line when asked:
//
//	msgs, err := publisher.ReadLines(os.Stdin, publisher.Lines{Subject: "payments.in", IDField: "event_id"})
//	acks, err := p.PublishBatch(ctx, msgs)
//
// Input does the same for one message or lines, checking all of it and
// saying a refusal (*ConfigError) in the caller's words (Input.Names):
//
//	msgs, err := publisher.Input{Subject: "payments.in", Lines: os.Stdin, Names: map[string]string{"Subject": "--subject"}}.Messages()
package publisher
