"""RocketMQ's remoting protocol as pure functions and values: no sockets, no event loop, no threads.

* ``command``  -- ``RemotingCommand`` and the codes (request, response, language, serialize type);
* ``codec``    -- frames: ``encode`` and the incremental ``FrameDecoder`` (JSON and ROCKETMQ headers);
* ``headers``  -- the custom headers (extFields) of the requests and responses we serve or send;
* ``fastjson`` -- JSON as RocketMQ's fastjson writes it (bare integer map keys) with size/depth limits;
* ``jsonscan`` -- Python's C JSON decoder held to fastjson's rules (what fastjson reads with);
* ``limits``   -- what each request code may carry, and the server's decoder that reads its header first;
* ``bodies``   -- the JSON bodies (SyncStateSet, BrokerReplicasInfo, ClusterInfo, TopicRouteData, ...);
* ``errors``   -- ``RemotingProtocolError`` (drop the connection), ``HeaderFieldError``, ``BodyError``;
* ``acl``      -- requests signed with the auth token (fields by name, code, time, body; replay; RocketMQ's ACL too);
* ``mqctl_ext`` -- the fields and the one request mqctl's brokers add to RocketMQ's controller requests;
* ``javaorder`` -- the order Java's HashMap, HashSet and Properties iterate keys in (what RocketMQ prints).

docs/remoting.md describes the wire format, the limits and how compatibility is tested.
"""

__all__ = ["acl", "admin_bodies", "admin_headers", "bodies", "broker_bodies", "broker_headers", "codec", "command", "errors", "fastjson", "headers",
           "javaorder", "jsonscan", "limits", "message", "mqctl_ext", "namesrv_bodies", "subscription_bodies"]
