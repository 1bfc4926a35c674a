application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  tls {
    cert_file = "ok.wasm"
    key_file  = <<-EOT
      -----BEGIN PRIVATE KEY-----
      MC4CAQAwBQYDK2VwBCIEIPastedKeySecretPastedKeySecretPastedKey
      -----END PRIVATE KEY-----
    EOT
  }
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}

# A key pasted in place of its file's path.
# expect: 7:17: error: Key written in the configuration | the path of the file that holds the private key
# not printed: PastedKeySecret
