"""The MRC fabric controller: route compiler, table walker, planner, P4Runtime client,
gRPC service and mrcctl."""
