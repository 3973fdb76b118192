// Package partition runs several partitions of a partitioned stream in
// one process. A stream created with a {{partition(N,K)}} subject mapping
// stores every message of a key under one partition number; each
// partition is consumed by its own durable (Durable) into its own ledger
// (Ledger), filtered to its subjects (Filter), so one ledger holds all of
// a key's state. Run starts one consumer per partition and stops all of
// them on the first failure. PublishSubject undoes a stream's mapping, for
// a copy to land in the partition its first one did.
//
//	n := partition.Count(info.Config) // 0: not partitioned
//	err := partition.Run(ctx, partition.Config{
//		Partitions: partition.Here(nil, n),
//		Start: func(ctx context.Context, i int) error {
//			st, err := ledger.Open(partition.Ledger("ledger.db", i), ledger.Config{})
//			if err != nil {
//				return err
//			}
//			defer st.Close()
//			cfg := consumer.Config{Stream: "PAY", Durable: partition.Durable("jetledger", i),
//				FilterSubjects: []string{partition.Filter(i)}}
//			c, err := consumer.New(ctx, js, st, cfg)
//			if err != nil {
//				return err
//			}
//			return c.Run(ctx)
//		}})
package partition
