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
//
// It also stands in for the kubelet's volume mounts of claims: for every
// volume mount of a persistentVolumeClaim volume, <pod-root>/<namespace>/
// <pod><mountPath> is a symlink to the bound PersistentVolume's hostPath
// folder (PVC spec.volumeName -> PV spec.hostPath.path, both read from
// informer caches), so a file an exec writes through the pod shows in the
// volume, and another pod mounting the same claim sees it. Until the claim
// is bound the pod is retried through the work queue (at most every 2 s),
// and only a pod whose every volume is in place gets its .uid marker. The
// seam does not enforce readOnly: a read-only mount is the same symlink.
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
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

// expand finishes expansions of claims bound to volumes this provisioner
// made. It looks at the informer's cache, never lists through the apiserver.
func expand(ctx context.Context, c kubernetes.Interface, pvcs corelisters.PersistentVolumeClaimLister, delay time.Duration) {
	seen := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		claims, err := pvcs.List(labels.Everything())
		if err != nil {
			klog.ErrorS(err, "list claims")
			continue
		}
		for _, cached := range claims {
			if cached.Status.Phase != v1.ClaimBound || cached.Spec.VolumeName == "" {
				continue
			}
			want := cached.Spec.Resources.Requests[v1.ResourceStorage]
			have := cached.Status.Capacity[v1.ResourceStorage]
			if want.Cmp(have) <= 0 {
				continue
			}
			key := string(cached.UID) + "/" + want.String()
			first, ok := seen[key]
			if !ok {
				seen[key] = time.Now()
				continue
			}
			if time.Since(first) < delay {
				continue
			}
			pv, err := c.CoreV1().PersistentVolumes().Get(ctx, cached.Spec.VolumeName, metav1.GetOptions{})
			if err != nil || pv.Annotations["pv.kubernetes.io/provisioned-by"] != provisionerName {
				continue
			}
			pv.Spec.Capacity[v1.ResourceStorage] = want
			if _, err := c.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
				klog.ErrorS(err, "grow volume", "pv", pv.Name)
				continue
			}
			pvc := cached.DeepCopy()
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

// volumes writes the ConfigMap volumes and links the claim volumes of
// scheduled pods, driven by pod events (like the kubelet, it watches; it
// never polls a full list).
type volumes struct {
	root  string
	pods  corelisters.PodLister
	cms   corelisters.ConfigMapLister
	pvcs  corelisters.PersistentVolumeClaimLister
	pvs   corelisters.PersistentVolumeLister
	queue workqueue.TypedRateLimitingInterface[string]
}

func (v *volumes) enqueue(obj interface{}) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		v.queue.Add(key)
	}
}

func (v *volumes) run(ctx context.Context) {
	for {
		key, quit := v.queue.Get()
		if quit {
			return
		}
		if err := v.sync(key); err != nil {
			klog.ErrorS(err, "materialize volumes", "pod", key)
			v.queue.AddRateLimited(key)
		} else {
			v.queue.Forget(key)
		}
		v.queue.Done(key)
	}
}

func (v *volumes) sync(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	dir := filepath.Join(v.root, ns, name)
	pod, err := v.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return nil
	}
	marker := filepath.Join(dir, ".uid")
	if b, err := os.ReadFile(marker); err == nil && string(b) == string(pod.UID) {
		return nil
	}
	if err := writePodVolumes(v.cms, pod, dir); err != nil {
		return err
	}
	// The marker goes last: a claim not bound yet fails here, and the retry
	// redoes the whole pod.
	if err := v.linkClaims(pod, dir); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(pod.UID), 0o644)
}

// linkClaims makes each mount of a persistentVolumeClaim volume a symlink
// to the bound volume's hostPath folder (see the header for why).
func (v *volumes) linkClaims(pod *v1.Pod, dir string) error {
	claims := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			claims[vol.Name] = vol.PersistentVolumeClaim.ClaimName
		}
	}
	for _, ctr := range pod.Spec.Containers {
		for _, m := range ctr.VolumeMounts {
			claim, ok := claims[m.Name]
			if !ok {
				continue
			}
			folder, err := v.claimFolder(pod.Namespace, claim)
			if err != nil {
				return err
			}
			if m.SubPath != "" {
				folder = filepath.Join(folder, filepath.Clean("/"+m.SubPath))
			}
			target := filepath.Join(dir, filepath.Clean("/"+m.MountPath))
			if have, err := os.Readlink(target); err == nil && have == folder {
				continue // two containers mounting the claim at one path
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(folder, target); err != nil {
				return fmt.Errorf("link claim %s at %s: %w", claim, m.MountPath, err)
			}
		}
	}
	return nil
}

// claimFolder is the hostPath folder of the volume bound to the claim, or
// an error (so the pod is retried) while the claim is not bound.
func (v *volumes) claimFolder(ns, claim string) (string, error) {
	pvc, err := v.pvcs.PersistentVolumeClaims(ns).Get(claim)
	if err != nil {
		return "", fmt.Errorf("claim %s/%s: %w", ns, claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != v1.ClaimBound {
		return "", fmt.Errorf("claim %s/%s is not bound yet", ns, claim)
	}
	pv, err := v.pvs.Get(pvc.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, ns, claim, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("volume %s of claim %s/%s is not a hostPath volume", pv.Name, ns, claim)
	}
	return pv.Spec.HostPath.Path, nil
}

func writePodVolumes(cms corelisters.ConfigMapLister, pod *v1.Pod, dir string) error {
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
			cm, err := cms.ConfigMaps(pod.Namespace).Get(cmName)
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
	podRoot := flag.String("pod-root", "", "write the ConfigMap volumes and link the claim volumes of pods under this folder")
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
	// client-go's default of 5 requests/s would make this test stand-in the
	// slowest part of a 1000-pod run.
	cfg.QPS, cfg.Burst = 200, 400
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcs := factory.Core().V1().PersistentVolumeClaims()
	pvcs.Informer()
	var vols *volumes
	if *podRoot != "" {
		vols = &volumes{
			root: *podRoot,
			pods: factory.Core().V1().Pods().Lister(),
			cms:  factory.Core().V1().ConfigMaps().Lister(),
			pvcs: pvcs.Lister(),
			pvs:  factory.Core().V1().PersistentVolumes().Lister(),
			// A ConfigMap published after its pod, or a claim bound after
			// it: retried every 2 s at most.
			queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 2*time.Second)),
		}
		handler := cache.ResourceEventHandlerFuncs{
			AddFunc:    vols.enqueue,
			UpdateFunc: func(_, obj interface{}) { vols.enqueue(obj) },
			DeleteFunc: vols.enqueue,
		}
		if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(handler); err != nil {
			klog.Fatalf("pod informer: %v", err)
		}
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go expand(ctx, client, pvcs.Lister(), *resizeDelay)
	if vols != nil {
		go func() { <-ctx.Done(); vols.queue.ShutDown() }()
		for i := 0; i < 4; i++ {
			go vols.run(ctx)
		}
	}
	pc := controller.NewProvisionController(ctx, client, provisionerName, &hostPath{root: *root},
		controller.LeaderElection(false))
	pc.Run(ctx)
}
