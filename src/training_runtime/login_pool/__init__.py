"""The login pool (issue #41, part 4): login nodes behind one Network Load Balancer, sharing host keys kept in Secrets
Manager, each serving a health endpoint the load balancer checks (a drained node stops taking new sessions)."""
