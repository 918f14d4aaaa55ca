// Command provisioner is the test environment's dynamic volume provisioner.
// It binds PVCs of its StorageClass to hostPath PersistentVolumes under a
// folder on this machine (through sig-storage-lib-external-provisioner), and
// it completes volume expansion: after --resize-delay it raises the PV's
// capacity and the claim's status.capacity to the requested size, so a test
// can see an expansion in flight and then finished.
//
// With --pod-root it also stands in for the kubelet's ConfigMap volume
// plugin: kwok pods have no filesystem, so the files of every ConfigMap a
// pod mounts are written to <pod-root>/<namespace>/<pod><mountPath>/<key>,
// where the test environment's kwok exec (which runs on this host, with
// EXO_POD_ROOT set) finds them. A container env EXO_TEST_TAMPER_CONFIGMAP
// naming a ConfigMap makes its files land with one byte appended, so tests
// can make the live content differ from what was published.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const provisionerName = "exo.test/hostpath"

type hostPath struct{ root string }

func (h *hostPath) Provision(_ context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	dir := filepath.Join(h.root, o.PVName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("create %s: %w", dir, err)
	}
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	hpType := v1.HostPathDirectoryOrCreate
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: o.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &hpType},
			},
		},
	}, controller.ProvisioningFinished, nil
}

func (h *hostPath) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return nil
	}
	return os.RemoveAll(pv.Spec.HostPath.Path)
}

// expand finishes expansions of claims bound to volumes this provisioner made.
func expand(ctx context.Context, c kubernetes.Interface, delay time.Duration) {
	seen := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		pvcs, err := c.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.ErrorS(err, "list claims")
			continue
		}
		for i := range pvcs.Items {
			pvc := &pvcs.Items[i]
			if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
				continue
			}
			want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
			have := pvc.Status.Capacity[v1.ResourceStorage]
			if want.Cmp(have) <= 0 {
				continue
			}
			key := string(pvc.UID) + "/" + want.String()
			first, ok := seen[key]
			if !ok {
				seen[key] = time.Now()
				continue
			}
			if time.Since(first) < delay {
				continue
			}
			pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil || pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisionerName {
				continue
			}
			pv.Spec.Capacity[v1.ResourceStorage] = want
			if _, err := c.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
				klog.ErrorS(err, "grow volume", "pv", pv.Name)
				continue
			}
			pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: want}
			if _, err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				klog.ErrorS(err, "grow claim", "pvc", pvc.Namespace+"/"+pvc.Name)
				continue
			}
			delete(seen, key)
			klog.InfoS("expanded", "pvc", pvc.Namespace+"/"+pvc.Name, "size", want.String())
		}
	}
}

// materialize writes the ConfigMap volumes of every scheduled pod.
func materialize(ctx context.Context, c kubernetes.Interface, root string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.ErrorS(err, "list pods")
			continue
		}
		live := map[string]bool{}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Spec.NodeName == "" {
				continue
			}
			dir := filepath.Join(root, pod.Namespace, pod.Name)
			live[dir] = true
			marker := filepath.Join(dir, ".uid")
			if b, err := os.ReadFile(marker); err == nil && string(b) == string(pod.UID) {
				continue
			}
			if err := writePodVolumes(ctx, c, pod, dir); err != nil {
				klog.ErrorS(err, "materialize volumes", "pod", pod.Namespace+"/"+pod.Name)
				continue
			}
			_ = os.WriteFile(marker, []byte(pod.UID), 0o644)
		}
		nss, _ := os.ReadDir(root)
		for _, ns := range nss {
			entries, _ := os.ReadDir(filepath.Join(root, ns.Name()))
			for _, e := range entries {
				dir := filepath.Join(root, ns.Name(), e.Name())
				if !live[dir] {
					_ = os.RemoveAll(dir)
				}
			}
		}
	}
}

func writePodVolumes(ctx context.Context, c kubernetes.Interface, pod *v1.Pod, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sources := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			sources[v.Name] = v.ConfigMap.Name
		}
	}
	tamper := ""
	for _, ctr := range pod.Spec.Containers {
		for _, e := range ctr.Env {
			if e.Name == "EXO_TEST_TAMPER_CONFIGMAP" {
				tamper = e.Value
			}
		}
	}
	for _, ctr := range pod.Spec.Containers {
		for _, m := range ctr.VolumeMounts {
			cmName, ok := sources[m.Name]
			if !ok || m.SubPath != "" {
				continue
			}
			cm, err := c.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			target := filepath.Join(dir, filepath.Clean("/"+m.MountPath))
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			for k, val := range cm.Data {
				if tamper == cmName {
					val += "!"
				}
				if err := os.WriteFile(filepath.Join(target, filepath.Base(k)), []byte(val), 0o644); err != nil {
					return err
				}
			}
			for k, val := range cm.BinaryData {
				if err := os.WriteFile(filepath.Join(target, filepath.Base(k)), val, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to the kubeconfig")
	root := flag.String("root", "", "folder that holds the volumes")
	resizeDelay := flag.Duration("resize-delay", 2*time.Second, "how long an expansion stays in flight")
	podRoot := flag.String("pod-root", "", "write the ConfigMap volumes of pods under this folder")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *root == "" {
		fmt.Fprintln(os.Stderr, "provisioner: --kubeconfig and --root are required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go expand(ctx, client, *resizeDelay)
	if *podRoot != "" {
		go materialize(ctx, client, *podRoot)
	}
	pc := controller.NewProvisionController(ctx, client, provisionerName, &hostPath{root: *root},
		controller.LeaderElection(false))
	pc.Run(ctx)
}
