//! The column descriptions the real server sends: each is the API
//! field's swagger doc text (`k8s.io/api` v0.32.9
//! `types_swagger_doc_generated.go`), named after the field it documents.
//! Generated text; keep it verbatim.

/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`, every Age column.
pub(crate) const AGE: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `PodStatus.podIP`.
pub(crate) const POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
/// `PodSpec.nodeName`.
pub(crate) const POD_NODE_NAME: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
/// `PodStatus.nominatedNodeName`.
pub(crate) const POD_NOMINATED_NODE: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
/// `PodSpec.readinessGates`.
pub(crate) const POD_READINESS_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
/// `ReplicaSetSpec.replicas`.
pub(crate) const RS_REPLICAS: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
/// `ReplicaSetStatus.replicas`.
pub(crate) const RS_STATUS_REPLICAS: &str = "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
/// `ReplicaSetStatus.readyReplicas`.
pub(crate) const RS_READY: &str = "The number of ready replicas for this replica set.";
/// `ReplicaSetSpec.selector`.
pub(crate) const RS_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
/// `DaemonSetStatus.desiredNumberScheduled`.
pub(crate) const DS_DESIRED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
/// `DaemonSetStatus.currentNumberScheduled`.
pub(crate) const DS_CURRENT: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
/// `DaemonSetStatus.numberReady`.
pub(crate) const DS_READY: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.";
/// `DaemonSetStatus.updatedNumberScheduled`.
pub(crate) const DS_UPDATED: &str = "The total number of nodes that are running updated daemon pod";
/// `DaemonSetStatus.numberAvailable`.
pub(crate) const DS_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
/// `PodSpec.nodeSelector`.
pub(crate) const POD_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
/// `DaemonSetSpec.selector`.
pub(crate) const DS_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
/// `DeploymentStatus.updatedReplicas`.
pub(crate) const DEPLOY_UPDATED: &str = "Total number of non-terminated pods targeted by this deployment that have the desired template spec.";
/// `DeploymentStatus.availableReplicas`.
pub(crate) const DEPLOY_AVAILABLE: &str = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.";
/// `DeploymentSpec.selector`.
pub(crate) const DEPLOY_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";
/// `JobStatus.succeeded`.
pub(crate) const JOB_SUCCEEDED: &str = "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.";
/// `JobSpec.selector`.
pub(crate) const JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
/// `CronJobSpec.schedule`.
pub(crate) const CRON_SCHEDULE: &str =
    "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.";
/// `CronJobSpec.timeZone`.
pub(crate) const CRON_TIMEZONE: &str = "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones";
/// `CronJobSpec.suspend`.
pub(crate) const CRON_SUSPEND: &str = "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.";
/// `CronJobStatus.active`.
pub(crate) const CRON_ACTIVE: &str = "A list of pointers to currently running jobs.";
/// `CronJobStatus.lastScheduleTime`.
pub(crate) const CRON_LAST_SCHEDULE: &str =
    "Information when was the last time the job was successfully scheduled.";
/// `ServiceSpec.type`.
pub(crate) const SVC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
/// `ServiceSpec.clusterIP`.
pub(crate) const SVC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
/// `ServiceSpec.externalIPs`.
pub(crate) const SVC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
/// `ServiceSpec.ports`.
pub(crate) const SVC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
/// `ServiceSpec.selector`.
pub(crate) const SVC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
/// `Endpoints.subsets`.
pub(crate) const ENDPOINTS_SUBSETS: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";
/// `NodeSystemInfo.kubeletVersion`.
pub(crate) const NODE_KUBELET_VERSION: &str = "Kubelet Version reported by the node.";
/// `NodeStatus.addresses`.
pub(crate) const NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
/// `NodeSystemInfo.osImage`.
pub(crate) const NODE_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
/// `NodeSystemInfo.kernelVersion`.
pub(crate) const NODE_KERNEL: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
/// `NodeSystemInfo.containerRuntimeVersion`.
pub(crate) const NODE_RUNTIME: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
/// `Secret.type`.
pub(crate) const SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
/// `Secret.data`.
pub(crate) const SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
/// `ServiceAccount.secrets`.
pub(crate) const SA_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
/// `ConfigMap.data`.
pub(crate) const CM_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
/// `PersistentVolumeClaimStatus.phase`.
pub(crate) const PVC_PHASE: &str = "phase represents the current phase of PersistentVolumeClaim.";
/// `PersistentVolumeClaimSpec.volumeName`.
pub(crate) const PVC_VOLUME_NAME: &str =
    "volumeName is the binding reference to the PersistentVolume backing this claim.";
/// `PersistentVolumeClaimStatus.capacity`.
pub(crate) const PVC_CAPACITY: &str =
    "capacity represents the actual resources of the underlying volume.";
/// `PersistentVolumeClaimStatus.accessModes`.
pub(crate) const PVC_ACCESS_MODES: &str = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1";
/// `PersistentVolumeClaimSpec.volumeMode`.
pub(crate) const PVC_VOLUME_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";
/// `LeaseSpec.holderIdentity`.
pub(crate) const LEASE_HOLDER: &str = "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.";
/// `Event.lastTimestamp`.
pub(crate) const EVENT_LAST_TIMESTAMP: &str =
    "The time at which the most recent occurrence of this event was recorded.";
/// `Event.type`.
pub(crate) const EVENT_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
/// `Event.reason`.
pub(crate) const EVENT_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
/// `Event.involvedObject`.
pub(crate) const EVENT_INVOLVED_OBJECT: &str = "The object that this event is about.";
/// `ObjectReference.fieldPath`.
pub(crate) const EVENT_FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
/// `Event.source`.
pub(crate) const EVENT_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
/// `Event.message`.
pub(crate) const EVENT_MESSAGE: &str =
    "A human-readable description of the status of this operation.";
/// `Event.firstTimestamp`.
pub(crate) const EVENT_FIRST_TIMESTAMP: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
/// `Event.count`.
pub(crate) const EVENT_COUNT: &str = "The number of times this event has occurred.";

/// `swaggerMetadataDescriptions["name"]`, the Name column's description.
pub(crate) const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
