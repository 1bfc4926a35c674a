application_id = "wordcount"

topic "words" {
  partitions = 4
}

repartition "words" {
  partitions = 4
}

# expect: 7:13: error: Ambiguous repartition name | The repartition "words" has the name of the topic block at testdata/errors/repartition_topic_clash.hcl:3
