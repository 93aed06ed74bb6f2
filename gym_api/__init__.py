"""The HTTP gateway: validates submissions, enqueues them for the GPU workers and serves results.

It never imports torch: everything it knows about an evaluation comes from the schema in `services.schema`
and the job records in Redis.
"""
