application_id = "wordcount"

topic "sentences" {
  partitions = 4
}

repartition "words" {
  partitions = 4
}

topic "sentences" {
  partitions = 8
}

repartition "words" {
  partitions = 2
}

topic "wordcount-words-repartition" {
  partitions = 4
}

# expect: 11:1: error: Duplicate topic | The topic "sentences" is already defined at testdata/errors/duplicate_topic.hcl:3.
# expect: 15:1: error: Duplicate repartition | The repartition "words" is already defined at testdata/errors/duplicate_topic.hcl:7.
# expect: 19:7: error: Reserved topic name | is the internal topic of repartition "words" (at testdata/errors/duplicate_topic.hcl:7)
