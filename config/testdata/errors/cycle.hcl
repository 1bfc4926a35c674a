application_id = "loops"

repartition "words" {
  partitions = 4
}

# Two processors that feed each other, and a third that joins in.
processor "p1" {
  module  = "ok.wasm"
  inputs  = ["in"]
  outputs = ["mid"]
}
processor "p2" {
  module  = "ok.wasm"
  inputs  = ["mid"]
  outputs = ["in"]
}
processor "p3" {
  module  = "ok.wasm"
  inputs  = ["mid"]
  outputs = ["side", "in"]
}

# Three, through a repartition topic named once by its short name and once in full.
processor "split" {
  module  = "ok.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "ok.wasm"
  inputs  = ["loops-words-repartition"]
  outputs = ["counts"]
}
processor "echo" {
  module  = "ok.wasm"
  inputs  = ["counts"]
  outputs = ["done", "sentences"]
}

# Through a dead-letter topic.
processor "risky" {
  module   = "ok.wasm"
  inputs   = ["jobs"]
  on_error = "dead_letter"
}
processor "retry" {
  module  = "ok.wasm"
  inputs  = ["loops-risky-dlq"]
  outputs = ["jobs"]
}

# A chain after a cycle is no cycle.
processor "tail" {
  module  = "ok.wasm"
  inputs  = ["done", "side"]
  outputs = ["sink"]
}

# expect: 11:14: error: Cycle of processors | The processors form a cycle: "p1" writes "mid" (at testdata/errors/cycle.hcl:11); "p2" reads it and writes "in" (at testdata/errors/cycle.hcl:16); "p1" reads it again. A record that goes round is processed again and again
# expect: 28:14: error: Cycle of processors | "split" writes "loops-words-repartition" (at testdata/errors/cycle.hcl:28); "count" reads it and writes "counts" (at testdata/errors/cycle.hcl:33); "echo" reads it and writes "sentences" (at testdata/errors/cycle.hcl:38); "split" reads it again.
# expect: 45:14: error: Cycle of processors | "risky" dead-letters to "loops-risky-dlq" (at testdata/errors/cycle.hcl:45); "retry" reads it and writes "jobs" (at testdata/errors/cycle.hcl:50); "risky" reads it again.
