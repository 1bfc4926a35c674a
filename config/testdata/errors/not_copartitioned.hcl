application_id = "join"

topic "a" {
  partitions = 4
}
repartition "w" {
  partitions = 3
}
processor "join" {
  module = "ok.wasm"
  inputs = ["a", "w", "elsewhere"]
}

# expect: 11:3: error: Inputs not co-partitioned | they have join-w-repartition: 3; a: 4.
