application_id = "app"

admin {
  listen         = "0.0.0.0:9464"
  metrics_public = true
}

# expect: 4:20: error: Admin listener without a token | The admin listener "0.0.0.0:9464" is reachable from other machines
# expect: 5:20: warning: metrics_public not used | has no effect without an admin token
