# The real control plane tier (tests/realk8s/, docs/realk8s.md): kube-apiserver, kube-controller-manager,
# kube-scheduler and etcd built from their Go modules, KWOK as the kubelets, amazon-ec2-metadata-mock, moto
# and Helm, all pinned in tests/realk8s/versions and cached outside the repository
# (REALK8S_CACHE, default /var/cache/spotdrain/realk8s). `make check-real` builds what is not
# cached yet (about 15 min of a 2-core machine the first time), then runs every case on one cluster.
.PHONY: check-real realk8s-deps
realk8s-deps:
	@tests/realk8s/setup all >/dev/null
check-real: $(BUILD)/spotdrain $(BUILD)/spotdrain-agent
	@SPOTDRAIN=$(BUILD)/spotdrain RK_LOGS=$(BUILD)/realk8s tests/realk8s/check $(CASES)
