kubectl get --raw /metrics | grep 'apiserver_flowcontrol_dispatched_requests_total{flow_schema="cascade"'
