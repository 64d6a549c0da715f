// Package pipeline moves a writer's rows from its calls to its committer: the open buffer and its seal policy,
// the memory and uncommitted budgets (a Router's shared Budget too), the queue of sealed batches, the encodings
// in flight and the ordered commit loop, which a Router's commit rounds gate. It decides when a batch is sealed,
// encoded and committed and in what order; what encoding and committing do is the writer's (Env), so the tests
// here drive it with a fake env, without a catalog or a clock.
//
// A batch is the writer's type B: the pipeline owns its Header (sequence number, counters, checkpoints, the
// rows accepted); the other stages' parts of it are the writer's.
package pipeline
